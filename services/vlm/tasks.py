"""The vlm jobs: thin handlers that generate or load inputs (`data`), call the methods (`tinyvlm`,
`following`, `cfpo`) on the job's device (`ctx.device`; bf16 autocast for supervised training on a
GPU, float32 for audits and RL, whose entropies and ratios are the measurement), and store
artifacts and models (`checkpoint`)."""

from __future__ import annotations

import io
import json

import numpy as np
from paperworks.services.vlm import checkpoint, data, figures
from paperworks.services.vlm.cfpo import rl
from paperworks.services.vlm.cfpo import task as vqa
from paperworks.services.vlm.following import audit, conflicts, steer
from paperworks.services.vlm.spec import (
    AuditParams,
    BuildConflictSetParams,
    EvaluateSpatialParams,
    PretrainParams,
    SteerParams,
    TrainRLParams,
    TrainSpatialParams,
    steer_refusal,
)
from paperworks.services.vlm.tinyvlm import VLMConfig, train
from paperworks.shared.devices import autocast
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

OCTET, PNG = "application/octet-stream", "image/png"
HELD_OUT = 10**9  # seed offset of the generated held-out items a job evaluates on


def _store_model(ctx: JobContext, model, info: dict, message: str) -> None:
    ctx.announce_model(ctx.put_artifact(checkpoint.MODEL, checkpoint.to_bytes(model, info), OCTET), message)


def _modality_mix_scores(model, seed: int, device: str, n: int = 600) -> dict:
    rng = np.random.default_rng(seed)
    items = conflicts.sample(
        rng, rng.integers(0, conflicts.LEVELS, n), rng.integers(0, conflicts.LEVELS, n), conflict=False
    )
    both = items.tokens("both")
    return {
        "text_only_accuracy": train.accuracy(model, items.pixels("text"), both, items.text_answer, device),
        "image_only_accuracy": train.accuracy(
            model, items.images, items.tokens("image"), items.visual_answer, device
        ),
        "bimodal_accuracy": train.accuracy(model, items.images, both, items.visual_answer, device),
    }


def _vqa_scores(model, seed: int, n: int, device: str) -> dict:
    rng = np.random.default_rng(seed)
    ind = rl.evaluate(model, vqa.sample(rng, n, "in_distribution"), device)
    anti = rl.evaluate(model, vqa.sample(rng, n, "anti_prior"), device)
    return {
        "in_distribution_accuracy": ind["accuracy"],
        "anti_prior_accuracy": anti["accuracy"],
        "visual_dependency": ind["visual_dependency"],
        "blank_accuracy": ind["blank_accuracy"],
    }


def run_pretrain(params: PretrainParams, ctx: JobContext) -> dict:
    config = VLMConfig(
        d_model=params.d_model,
        heads=params.heads,
        vision_layers=params.vision_layers,
        lm_layers=params.lm_layers,
    )
    model = train.build(config, params.seed, ctx.device)
    rng = np.random.default_rng(params.seed)
    if params.task == "modality_mix":

        def batches(_step):
            return conflicts.training_batch(
                rng, params.batch_size, params.text_fraction, params.image_fraction
            )
    else:

        def batches(_step):
            b = vqa.sample(rng, params.batch_size, "train", params.prior_strength)
            return b.images, b.tokens, b.answers

    def on_step(step, loss):
        ctx.progress(step, params.steps + 1, stage="training", message=f"loss {loss:.4f}")

    with autocast(ctx.device):
        loss = train.fit(model, batches, params.steps, params.learning_rate, ctx.device, on_step)
    if params.task == "modality_mix":
        scores = _modality_mix_scores(model, params.seed + HELD_OUT, ctx.device)
    else:
        scores = _vqa_scores(model, params.seed + HELD_OUT, 500, ctx.device)
        scores.pop("blank_accuracy")
    info = {"task": params.task, "job_id": ctx.job_id}
    _store_model(ctx, model, info, f"TinyVLM ({params.task}, {checkpoint.parameters(model)} parameters)")
    ctx.progress(params.steps + 1, params.steps + 1, stage="done", message=f"loss {loss:.4f}")
    return {"task": params.task, "final_loss": loss, "parameters": checkpoint.parameters(model), **scores}


def run_build_conflict_set(params: BuildConflictSetParams, ctx: JobContext) -> dict:
    cs = conflicts.build_grid(params.seed, params.per_cell)
    ctx.put_artifact("conflict_set.npz", data.conflict_set_bytes(cs), OCTET)
    ctx.progress(1, 1, stage="done", message=f"{len(cs)} items")
    return {"items": len(cs), "cells": conflicts.LEVELS**2, "per_cell": params.per_cell}


def _records_bytes(cs: conflicts.ConflictSet, records: audit.Records, indices) -> bytes:
    arrays = cs.to_arrays() | {f"relative_{i}": records.relative(i) for i in indices}
    arrays |= {
        "follow": records.follow(),
        "oscillations": records.oscillations(),
        "margins": records.margins(),
    }
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def run_audit_modality_following(params: AuditParams, ctx: JobContext) -> dict:
    ctx.progress(0, 3, stage="loading", message="model and conflict items")
    if params.model is not None:  # a Hugging Face VLM: the items rendered as its prompts and pictures
        model = data.hf_model_of(params.model, ctx, ctx.device)
    else:
        model, _ = data.model_of(ctx, params.model_job_id)
    cs = data.conflict_items(params, ctx)
    ctx.progress(1, 3, stage="probing", message=f"{len(cs)} items: text only, image only, both, logit lens")
    if params.model is not None:
        records = audit.run_adapter(model, cs, data.hf_where(params.model))
    else:
        records = audit.run_model(model, cs, ctx.device)
    if (records.follow() != audit.OTHER).sum() < 10:
        raise InvalidArgument("conflict_set", "fewer than 10 items followed either modality: nothing to fit")
    ctx.progress(2, 3, stage="fitting", message=f"logistic fit, {params.bootstrap} bootstrap resamples")
    out = audit.audit(
        records, tuple(params.indices), params.bins, params.bootstrap, params.epsilon, params.seed
    )
    first = out["laws"][params.indices[0]]
    x_star = first["balance_point"]
    d = np.abs(records.relative(params.indices[0]) - x_star)
    ctx.put_json(
        "audit.json",
        {
            "model_job_id": params.model_job_id or None,
            "model": params.model.label if params.model is not None else None,
            "indices": list(params.indices),
            "epsilon": params.epsilon,
            **out,
        },
    )
    ctx.put_artifact("records.npz", _records_bytes(cs, records, params.indices), OCTET)
    ctx.put_artifact("following_curve.png", figures.following_curve(out["laws"]), PNG)
    ctx.put_artifact(
        "layer_trajectories.png",
        figures.layer_trajectories(records.margins(), d < params.epsilon, d > 2 * params.epsilon),
        PNG,
    )
    ctx.progress(3, 3, stage="done", message=f"balance point {x_star:.3f}")
    return {
        "balance_point": x_star,
        "ci_low": first["ci"][0],
        "ci_high": first["ci"][1],
        "spearman": first["spearman_binned"],
        "spearman_p": first["spearman_items_p"],
        "balance_points": {i: law["balance_point"] for i, law in out["laws"].items()},
        "tfr": out["ratios"]["tfr"],
        "vfr": out["ratios"]["vfr"],
        "oscillations_ambiguous": out["oscillations"]["ambiguous"],
        "oscillations_clear": out["oscillations"]["clear"],
        "items": len(cs),
    }


def _held_out(model, cs, target: str, epsilon: float, device: str) -> dict:
    records = audit.run_model(model, cs, device)
    law = audit.following_law(records, "entropy", n_boot=10)
    return {
        "balance_point": law["balance_point"],
        "target_following": float(np.nanmean(audit.grid_following(records, target))),
        "oscillations": audit.oscillation_bands(records, law["balance_point"], epsilon)["ambiguous"],
    }


def run_steer_preference(params: SteerParams, ctx: JobContext) -> dict:
    field = "audit_job_id"
    raw, _ = ctx.job_artifact(
        "vlm", params.audit_job_id, "audit.json", field, kind="audit_modality_following"
    )
    report = json.loads(raw)
    if not report.get("model_job_id"):
        raise InvalidArgument(field, steer_refusal(params.audit_job_id, report.get("model")))
    model, info = data.model_of(ctx, report["model_job_id"], field)
    raw, _ = ctx.job_artifact(
        "vlm", params.audit_job_id, "records.npz", field, kind="audit_modality_following"
    )
    with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
        items = conflicts.ConflictSet.from_arrays({f: npz[f] for f in conflicts.FIELDS})
        index = report["indices"][0]
        relative = npz[f"relative_{index}"]
    x_star = report["laws"][index]["balance_point"]
    if not np.isfinite(x_star):
        raise InvalidArgument(field, "the audit found no balance point (the following curve does not fall)")
    chosen = steer.select_cases(relative, x_star, params.cases, params.selection, params.target_modality)
    held_out = conflicts.build_grid(params.seed + HELD_OUT, params.eval_per_cell)
    ctx.progress(0, params.steps + 2, stage="auditing", message="held-out grid before SFT")
    before = _held_out(model, held_out, params.target_modality, params.epsilon, ctx.device)

    def on_step(step, loss):
        ctx.progress(step, params.steps + 2, stage="sft", message=f"loss {loss:.4f}")

    with autocast(ctx.device):
        steer.steer(
            model,
            items.subset(chosen),
            params.target_modality,
            params.steps,
            params.batch_size,
            params.learning_rate,
            params.seed,
            ctx.device,
            on_step,
        )
    after = _held_out(model, held_out, params.target_modality, params.epsilon, ctx.device)
    sign = 1.0 if params.target_modality == "text" else -1.0
    result = {
        "cases": int(len(chosen)),
        "within_epsilon": int((np.abs(relative[chosen] - x_star) < params.epsilon).sum()),
        "balance_point_before": before["balance_point"],
        "balance_point_after": after["balance_point"],
        "shift_toward_target": sign * (after["balance_point"] - before["balance_point"]),
        "target_following_before": before["target_following"],
        "target_following_after": after["target_following"],
        "oscillations_before": before["oscillations"],
        "oscillations_after": after["oscillations"],
    }
    ctx.put_json(
        "steering.json",
        {
            "audit_job_id": params.audit_job_id,
            "index": index,
            "x_star": x_star,
            "selected": chosen.tolist(),
            **result,
        },
    )
    _store_model(
        ctx,
        model,
        info | {"job_id": ctx.job_id, "steered": params.target_modality},
        f"TinyVLM steered toward {params.target_modality} ({params.selection} cases)",
    )
    ctx.progress(
        params.steps + 2,
        params.steps + 2,
        stage="done",
        message=f"balance point {before['balance_point']:.3f} -> {after['balance_point']:.3f}",
    )
    return result


def run_train_rl(params: TrainRLParams, ctx: JobContext) -> dict:
    model, info = data.model_of(ctx, params.model_job_id)
    overrides = {
        k: v for k in ("kl_beta", "clip_high", "gamma", "entropy") if (v := getattr(params, k)) is not None
    }
    config = rl.RLConfig.preset(
        params.algorithm,
        params.base,
        steps=params.steps,
        prompts=params.prompts,
        group=params.group_size,
        learning_rate=params.learning_rate,
        updates=params.updates,
        prior_strength=params.prior_strength,
        seed=params.seed,
        **overrides,
    )
    watch = vqa.sample(
        np.random.default_rng(params.seed + HELD_OUT + 1), min(params.eval_items, 200), "in_distribution"
    )

    def on_step(step, record):
        vd = record.get("visual_dependency")
        ctx.progress(
            step,
            params.steps,
            stage=f"{params.algorithm} training",
            message=f"reward {record['reward']:.3f} kl {record['kl']:.4f} discrepancy "
            f"{record['discrepancy']:.4f}" + ("" if vd is None else f" visual dependency {vd:.3f}"),
        )

    history = rl.train(model, config, ctx.device, watch, max(1, params.steps // 10), on_step)
    scores = _vqa_scores(model, params.seed + HELD_OUT, params.eval_items, ctx.device)
    ctx.put_json("history.json", {"config": config.__dict__, "history": history})
    _store_model(
        ctx,
        model,
        info | {"job_id": ctx.job_id, "rl": params.algorithm},
        f"TinyVLM after {params.algorithm} ({params.steps} steps)",
    )
    name = params.algorithm if params.algorithm in ("grpo", "dapo") else f"{params.algorithm}-{params.base}"
    return {
        "algorithm": name,
        "final_reward": float(np.nanmean([h["reward"] for h in history[-10:]])),
        "kl": history[-1]["kl"],
        "discrepancy": history[-1]["discrepancy"],
        **scores,
    }


def _spatial_split(seed: int, items: int, frames: int):
    from paperworks.services.vlm.spatiolm import qa

    rng = np.random.default_rng(seed)
    return qa.sample(rng, items, qa.SPATIAL, frames), qa.sample(rng, items, qa.GENERAL, frames)


def run_train_spatial(params: TrainSpatialParams, ctx: JobContext) -> dict:
    """SpatioLM (arXiv 2608.01899): base VLM on general + spatial QA, then one arm on spatial QA.
    float32 throughout (the branch's exact zero-init identity and the confidence terms are kept)."""
    from paperworks.services.vlm.spatiolm import qa
    from paperworks.services.vlm.spatiolm import train as spatial
    from paperworks.services.vlm.spatiolm.model import SpatialConfig

    total = params.pretrain_steps + params.steps + 2
    ctx.progress(0, total, stage="rendering", message=f"{params.pretrain_items + params.items} scenes")
    rng = np.random.default_rng(params.seed)
    pre = qa.sample(rng, params.pretrain_items, qa.SPATIAL + qa.GENERAL, params.frames)
    pool = qa.sample(rng, params.items, qa.SPATIAL, params.frames)
    config = SpatialConfig(d_model=params.d_model, heads=params.heads, frames=params.frames)

    def pre_step(step, loss):
        ctx.progress(step, total, stage="pretraining base", message=f"loss {loss:.4f}")

    base = spatial.pretrain(
        config,
        pre,
        params.pretrain_steps,
        params.pretrain_learning_rate,
        params.batch_size,
        params.seed,
        ctx.device,
        pre_step,
    )
    losses = []

    def arm_step(step, loss):
        losses.append(loss)
        ctx.progress(
            params.pretrain_steps + step, total, stage=f"training {params.arm}", message=f"loss {loss:.4f}"
        )

    model = spatial.train_arm(
        base,
        params.arm,
        pool,
        params.steps,
        params.learning_rate,
        params.batch_size,
        params.seed,
        ctx.device,
        on_step=arm_step,
    )
    test_s, test_g = _spatial_split(params.seed + HELD_OUT, 200, params.frames)
    ours = spatial.evaluate(model, test_s, test_g, ctx.device)
    before = spatial.evaluate(spatial.Spatial(base), test_s, test_g, ctx.device)
    trainable = sum(
        p.numel() for part in (model.branch, model.head) if part is not None for p in part.parameters()
    )
    if params.arm == "finetune":
        trainable = checkpoint.parameters(model.vlm)
    n_params = sum(checkpoint.parameters(p) for p in (model.vlm, model.branch, model.head) if p is not None)
    info = {"task": "spatiolm", "arm": params.arm, "frames": params.frames, "job_id": ctx.job_id}
    ctx.announce_model(
        ctx.put_artifact(checkpoint.MODEL, checkpoint.spatial_to_bytes(model, info), OCTET),
        f"SpatioLM {params.arm} ({n_params} parameters, {trainable} trained)",
    )
    ctx.progress(total, total, stage="done", message=f"spatial accuracy {ours['spatial_accuracy']:.3f}")
    return {
        "arm": params.arm,
        "final_loss": float(np.mean(losses[-max(1, len(losses) // 10) :])),
        "spatial_accuracy": ours["spatial_accuracy"],
        "base_spatial_accuracy": before["spatial_accuracy"],
        "general_accuracy": ours["general_accuracy"],
        "base_general_accuracy": before["general_accuracy"],
        "trainable_parameters": int(trainable),
        "parameters": int(n_params),
    }


def spatial_model_of(ctx, job_id: str, field: str = "model_job_id"):
    job = ctx.finished_job("vlm", job_id, field)
    if job.kind != "train_spatial":
        raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not a train_spatial job")
    raw, _ = ctx.job_artifact("vlm", job_id, checkpoint.MODEL, field)
    return checkpoint.spatial_from_bytes(raw, ctx.device, field)


def run_evaluate_spatial(params: EvaluateSpatialParams, ctx: JobContext) -> dict:
    """Spatial and general QA tables of a train_spatial model and of the same VLM without its
    branch, the head's depth AbsRel and a PNG of predicted vs teacher depth."""
    from paperworks.services.vlm.spatiolm import train as spatial

    ctx.progress(0, 3, stage="loading", message="model")
    model, info = spatial_model_of(ctx, params.model_job_id)
    test_s, test_g = _spatial_split(params.seed, params.items, model.vlm.config.frames)
    ctx.progress(
        1, 3, stage="evaluating", message=f"{params.items} spatial + {params.items} general questions"
    )
    ours = spatial.evaluate(model, test_s, test_g, ctx.device)
    base = spatial.evaluate(spatial.Spatial(model.vlm), test_s, test_g, ctx.device)
    result = {
        "spatial_accuracy": ours["spatial_accuracy"],
        "spatial_mra": ours["spatial_mra"],
        "general_accuracy": ours["general_accuracy"],
        "base_spatial_accuracy": base["spatial_accuracy"],
        "base_spatial_mra": base["spatial_mra"],
        "base_general_accuracy": base["general_accuracy"],
        "items": params.items,
    }
    if model.head is not None:
        teacher = spatial.Teacher(params.seed)(
            test_s.depth, test_s.rays, test_s.images, np.random.default_rng(params.seed)
        )
        truth = spatial.half(test_s.depth)
        result["depth_abs_rel"] = ours["depth_abs_rel"]
        result["teacher_abs_rel"] = float(np.mean(np.abs(teacher["depth"].numpy() - truth) / truth))
        _, predicted = spatial.predict(model, test_s, ctx.device)
        k = min(4, params.items)
        ctx.put_artifact(
            "depth.png",
            figures.spatial_depth(
                test_s.images[:k, 0, ::2, ::2],
                teacher["depth"].numpy()[:k, 0],
                predicted[:k, 0],
                truth[:k, 0],
            ),
            PNG,
        )
    ctx.put_json(
        "evaluation.json",
        {"model_job_id": params.model_job_id, "info": info, "with_branch": ours, "without_branch": base},
    )
    ctx.progress(3, 3, stage="done", message=f"spatial accuracy {ours['spatial_accuracy']:.3f}")
    return result
