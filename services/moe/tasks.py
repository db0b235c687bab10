"""The moe jobs: thin handlers that build or load inputs (`data`), call the methods (`dpsl`,
`skillnet`) on the job's device (`ctx.device`; float32 throughout: the routing distributions are the
measurement), and store artifacts and models (`checkpoint`)."""

from __future__ import annotations

import numpy as np
from paperworks.services.moe import checkpoint, data, figures, hf_model, skillnet, skills
from paperworks.services.moe.dpsl import train
from paperworks.services.moe.dpsl.losses import RouterTerm
from paperworks.services.moe.dpsl.model import ModelConfig, upcycle
from paperworks.services.moe.spec import (
    MOE_KINDS,
    EvaluateRoutingParams,
    EvaluateSkillsParams,
    TrainMoEParams,
    TrainSkillPolicyParams,
    UpcycleParams,
    WorldParams,
)
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

OCTET, PNG = "application/octet-stream", "image/png"
HELD_OUT = 10**9  # seed offset of the held-out sequences a job evaluates on


def _store(ctx: JobContext, name: str, model, info: dict, message: str | None = None) -> None:
    ref = ctx.put_artifact(name, checkpoint.to_bytes(model, info), OCTET)
    if message is not None:
        ctx.announce_model(ref, message)


def _held_out(world_params: dict, seed: int, n: int, device: str, share: float = 0.5):
    return data.world(world_params).sample(np.random.default_rng(seed + HELD_OUT), n, share, device)


def run_upcycle(params: UpcycleParams, ctx: JobContext) -> dict:
    if params.base is not None:
        return _upcycle_hf(params, ctx)
    total = params.dense_steps + 2
    if params.dense is not None:
        dense, info = data.dense_model(params.dense, ctx)
        world_params = info.get("world") or params.world.model_dump()
        if data.world(world_params).d_in != dense.config.d_in:
            raise InvalidArgument("dense", f"takes {dense.config.d_in}-wide tokens, the world has other")
    else:
        world_params = params.world.model_dump()
        config = ModelConfig(
            d_in=params.world.d_in,
            d_model=params.d_model,
            heads=params.heads,
            d_ff=params.d_ff,
            layers=params.layers,
            classes=params.world.classes,
        )
        dense = train.build_dense(config, params.seed, ctx.device)

        def on_step(step, record):
            ctx.progress(step, total, stage="dense training", message=f"loss {record['task_loss']:.4f}")

        train.fit(
            dense,
            data.world(world_params),
            params.dense_steps,
            params.batch_size,
            params.learning_rate,
            params.seed,
            ctx.device,
            on_step=on_step,
        )
    ratio = params.drop_ratio if params.init == "drop_upcycle" else 0.0
    moe = upcycle(dense, params.experts, params.top_k, ratio, params.seed)
    test = _held_out(world_params, params.seed, 2000, ctx.device)
    dense_acc = train.evaluate(dense, test)["accuracy"]
    moe_acc = train.evaluate(moe, test)["accuracy"]
    info = {"world": world_params, "job_id": ctx.job_id, "init": params.init, "drop_ratio": ratio}
    _store(ctx, checkpoint.DENSE, dense, info)
    _store(
        ctx,
        checkpoint.MODEL,
        moe,
        info,
        f"upcycled MoE ({params.experts} experts, top-{params.top_k}, {params.init})",
    )
    ctx.progress(total, total, stage="done", message=f"accuracy dense {dense_acc:.3f} -> MoE {moe_acc:.3f}")
    return {
        "dense_accuracy": dense_acc,
        "upcycled_accuracy": moe_acc,
        "experts": params.experts,
        "top_k": params.top_k,
        "parameters": checkpoint.parameters(moe),
    }


def _upcycle_hf(params: UpcycleParams, ctx: JobContext) -> dict:
    """A Hugging Face causal LM -> its family's transformers MoE, saved as `model.tar` (announced)."""
    from paperworks.services.moe.hf_upcycle import upcycle_causal_lm

    ctx.progress(0, 3, stage="loading", message=f"base {params.base.label}")
    backend = hf_model.open_base(params.base, ctx, ctx.device)
    dense = backend.module.float().eval()
    ratio = params.drop_ratio if params.init == "drop_upcycle" else 0.0
    ctx.progress(
        1, 3, stage="upcycling", message=f"{params.experts} experts, top-{params.top_k}, {params.init}"
    )
    try:
        moe, report = upcycle_causal_lm(dense, params.experts, params.top_k, ratio, params.seed)
    except ValueError as exc:
        raise InvalidArgument(hf_model.source_field(params.base, "base"), str(exc)) from None
    config = dense.config
    measured = hf_model.probe(dense, moe, config.vocab_size, backend.max_length, params.seed)
    ref = ctx.put_artifact(hf_model.ARCHIVE, hf_model.save_archive(moe, backend.tokenizer), OCTET)
    ctx.put_json("upcycle.json", {"init": params.init, "drop_ratio": ratio, "seed": params.seed,
                                  "dense_model_type": report.dense_type, "moe_model_type": report.moe_type,
                                  "dropped_neurons": report.dropped, **measured})  # fmt: skip
    ctx.announce_model(
        ref,
        f"upcycled {report.moe_type} of {params.base.label} ({params.experts} experts, top-{params.top_k}, "
        f"{params.init})",
    )
    ctx.progress(3, 3, stage="done", message=f"max logit difference {measured['max_logit_difference']:.2e}")
    return {
        "experts": params.experts,
        "top_k": params.top_k,
        "parameters": checkpoint.parameters(moe),
        "dense_parameters": checkpoint.parameters(dense),
        "model_type": report.moe_type,
        **measured,
    }


def router_terms(params: TrainMoEParams, experts: int) -> list[RouterTerm]:
    terms = []
    for i, t in enumerate(params.router_losses):
        per_modality = [list(a.alpha) for a in t.per_modality] or None
        sizes = {len(a) for a in per_modality} if per_modality else {len(t.alpha)}
        if t.type == "dpsl" and not sizes <= {1, experts} or (per_modality and sizes != {experts}):
            field = f"router_losses[{i}].{'per_modality' if per_modality else 'alpha'}"
            raise InvalidArgument(field, f"the model has {experts} experts: give 1 or {experts} values")
        terms.append(RouterTerm(t.type, t.weight, list(t.alpha), per_modality, t.warmup_steps, t.rate))
    return terms


def _routing_result(evaluated: dict) -> dict:
    keep = ("accuracy", "confidence", "entropy", "max_mean_load", "mutual_information", "modality_entropy")
    return {k: evaluated[k] for k in keep} | {"layers": evaluated["layers"]}


def _train_moe_hf(params: TrainMoEParams, ctx: JobContext) -> dict:
    """A Hugging Face MoE's routers trained with the router-loss mix on text (`hf_train`)."""
    from paperworks.services.moe import hf_train

    data.check_hf_terms(params.router_losses)
    _, backend = hf_model.open_moe(params.model_job_id, ctx, ctx.device, "model_job_id")
    moe = backend.module.float()
    experts = hf_train.routers(moe)[0].shape[0]
    terms = router_terms(params, experts)
    seq_len = min(params.seq_len, backend.max_length - 1)
    windows = data.text_windows(params.text, ctx, backend.encode, seq_len, params.seed).to(ctx.device)
    held = max(1, min(params.eval_sequences, len(windows) // 10))
    train_windows, test_windows = windows[:-held], windows[-held:]

    def on_step(step, record):
        message = f"lm {record['task_loss']:.4f}" + "".join(
            f" {k} {v:.4f}" for k, v in record.items() if k not in ("step", "task_loss")
        )
        ctx.progress(step, params.steps + 1, stage="training routers", message=message)

    history = hf_train.fit_routers(
        moe, train_windows, terms, params.steps, params.batch_size, params.router_learning_rate, params.seed,
        on_step=on_step,
    )  # fmt: skip
    prior = next((t.alpha * (experts if len(t.alpha) == 1 else 1) for t in terms if t.type == "dpsl"), None)
    evaluated = hf_train.evaluate(moe, test_windows, prior)
    tail = history[-max(1, len(history) // 10) :]
    keep = ("confidence", "entropy", "max_mean_load")
    result = {
        "final_task_loss": float(np.mean([h["task_loss"] for h in tail])),
        "held_out_loss": evaluated["task_loss"],
        **{k: evaluated[k] for k in keep},
        "layers": evaluated["layers"],
    }
    ctx.put_json("history.json", {"router_losses": [t.__dict__ for t in terms], "history": history})
    ctx.put_json("routing.json", result | {"alpha": prior})
    ref = ctx.put_artifact(hf_model.ARCHIVE, hf_model.save_archive(moe, backend.tokenizer), OCTET)
    ctx.announce_model(
        ref,
        f"Hugging Face MoE of job {params.model_job_id}, routers trained {params.steps} steps with "
        f"{'+'.join(t.type for t in terms) or 'the LM loss only'}",
    )
    ctx.progress(
        params.steps + 1, params.steps + 1, stage="done",
        message=f"confidence {result['confidence']:.3f} max/mean load {result['max_mean_load']:.3f}",
    )  # fmt: skip
    return result


def run_train_moe(params: TrainMoEParams, ctx: JobContext) -> dict:
    job = ctx.finished_job("moe", params.model_job_id, "model_job_id")
    if job.kind in MOE_KINDS and data.hf_moe(ctx.store, job):
        return _train_moe_hf(params, ctx)
    model, info = data.moe_of(ctx, params.model_job_id)
    terms = router_terms(params, model.config.experts)
    world_params = info.get("world") or WorldParams().model_dump()

    def on_step(step, record):
        message = f"task {record['task_loss']:.4f}" + "".join(
            f" {k} {v:.4f}" for k, v in record.items() if k not in ("step", "task_loss")
        )
        ctx.progress(step, params.steps + 1, stage="training", message=message)

    history = train.fit(
        model,
        data.world(world_params),
        params.steps,
        params.batch_size,
        params.learning_rate,
        params.seed,
        ctx.device,
        terms=terms,
        router_learning_rate=params.router_learning_rate,
        on_step=on_step,
    )
    evaluated = train.evaluate(model, _held_out(world_params, params.seed, params.eval_sequences, ctx.device))
    result = {
        "final_task_loss": float(np.mean([h["task_loss"] for h in history[-max(1, len(history) // 10) :]])),
        **_routing_result(evaluated),
    }
    ctx.put_json("history.json", {"router_losses": [t.__dict__ for t in terms], "history": history})
    ctx.put_json("routing.json", result)
    _store(
        ctx,
        checkpoint.MODEL,
        model,
        info | {"job_id": ctx.job_id, "router_losses": [t.type for t in terms]},
        f"MoE trained {params.steps} steps with {'+'.join(t.type for t in terms) or 'task loss only'}",
    )
    ctx.progress(
        params.steps + 1,
        params.steps + 1,
        stage="done",
        message=f"accuracy {result['accuracy']:.3f} confidence {result['confidence']:.3f} "
        f"max/mean load {result['max_mean_load']:.3f}",
    )
    return result


def run_evaluate_routing(params: EvaluateRoutingParams, ctx: JobContext) -> dict:
    model, info = data.moe_of(ctx, params.model_job_id)
    e = model.config.experts
    if len(params.alpha) not in (1, e):
        raise InvalidArgument("alpha", f"the model has {e} experts: give 1 or {e} values")
    prior = list(params.alpha) * e if len(params.alpha) == 1 else list(params.alpha)
    world_params = info.get("world") or WorldParams().model_dump()
    batch = _held_out(world_params, params.seed, params.sequences, ctx.device, params.modality_share)
    ctx.progress(0, 2, stage="routing", message=f"{params.sequences} held-out sequences")
    evaluated = train.evaluate(model, batch, prior)
    probs = [r["probs"].detach().cpu().numpy() for r in model.routing()]
    result = {"sequences": params.sequences, **_routing_result(evaluated)}
    ctx.put_json("routing.json", result | {"alpha": prior})
    ctx.put_artifact("routing_histograms.png", figures.routing_histograms(probs, evaluated["layers"]), PNG)
    ctx.progress(2, 2, stage="done", message=f"confidence {result['confidence']:.3f}")
    return result


def run_train_skill_policy(params: TrainSkillPolicyParams, ctx: JobContext) -> dict:
    tasks = skillnet.valid_tasks()
    ctx.progress(0, params.steps + 1, stage="demonstrations", message=f"{len(tasks)} tasks")
    demos = skillnet.make_demonstrations(tasks, params.demos_per_task, params.seed)
    losses = []

    def progress(step, record):
        losses.append(float(record.get("action", np.nan)))
        ctx.progress(step + 1, params.steps + 1, stage="training", message=f"loss {losses[-1]:.4f}")

    policy = skillnet.train_policy(
        skillnet.PolicyConfig(arm=params.arm, head=params.head),
        demos,
        params.steps,
        ctx.device,
        seed=params.seed,
        batch=params.batch_size,
        lr=params.learning_rate,
        progress=progress,
    )
    files = skills.policy_files(policy)
    ctx.put_artifact(skills.CONFIG, files[skills.CONFIG], "application/json")
    ref = ctx.put_artifact(skills.POLICY, files[skills.POLICY], OCTET)
    ctx.announce_model(ref, f"SkillNet policy ({params.arm}, {params.head} head, {params.steps} steps)")
    ctx.put_json("history.json", {"loss": losses})
    tail = losses[-max(1, len(losses) // 10) :]
    ctx.progress(params.steps + 1, params.steps + 1, stage="done", message=f"{params.arm} trained")
    return {"arm": params.arm, "final_loss": float(np.nanmean(tail)) if tail else float("nan")}


def run_evaluate_skills(params: EvaluateSkillsParams, ctx: JobContext) -> dict:
    field = "model_job_id"
    ctx.finished_job("moe", params.model_job_id, field, kind="train_skill_policy")
    weights, _ = ctx.job_artifact("moe", params.model_job_id, skills.POLICY, field)
    config, _ = ctx.job_artifact("moe", params.model_job_id, skills.CONFIG, field)
    policy = skills.load_policy(weights, config, ctx.device, field)
    tasks = skillnet.valid_tasks()
    ctx.progress(0, 2, stage="rollouts", message=f"{len(tasks)} tasks x {params.episodes_per_task} episodes")
    out = skillnet.evaluate(policy, tasks, params.episodes_per_task, params.seed, max_steps=params.max_steps)
    _, worlds = skillnet.rollout(policy, [tasks[0]], 1, params.seed, max_steps=params.max_steps, record=True)
    frames = skillnet.render_frames(worlds, 0, max(1, len(worlds) // 10), 120)
    ctx.put_json("skills.json", out)
    ctx.put_artifact("rollout.png", skills.strip(frames), PNG)
    ctx.progress(2, 2, stage="done", message=f"success {out['success']:.3f}")
    return {"success": out["success"], "first_subtask": out["first_subtask"], "per_task": out["per_task"]}
