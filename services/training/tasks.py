"""The training jobs: thin handlers. plan_parallelism profiles the composed model under its freezing
pattern (`cornstarch.costs`), partitions it (`cornstarch.partition`: frozen-aware and the three
frozen-unaware baselines) and scores the CP split modes on synthetic sequences (`cornstarch.context`);
train runs a plan on worker processes that this job starts and reaps (`cornstarch.launch`: on
success, failure and cancellation); simulate runs the schedule simulator.

Models: the composed model's encoders and LM are defined by sizes or come from Hugging Face folders
(`data.config` resolves them for the job's tenant; the workers load them from the local folder).

Devices: `ctx.device` places the run (`cornstarch.placement`): CPU -> gloo on CPU tensors; CUDA ->
NCCL, one GPU per rank, profiling timed on the GPU. A CUDA device the worker cannot provide (no GPU,
fewer GPUs than ranks) is FAILED_PRECONDITION on `device` before anything starts."""

from __future__ import annotations

import statistics

import numpy as np
from paperworks.services.training import checkpoint, data, figures
from paperworks.services.training.cornstarch import context, costs, launch, partition, placement, schedule
from paperworks.services.training.cornstarch.model import MLLM, Freeze, microbatches, synthetic_batch
from paperworks.services.training.spec import (
    MAX_CANDIDATES,
    TRAIN_MAX_WORLD,
    PlanParallelismParams,
    SimulateParams,
    TrainParams,
)
from paperworks.shared.errors import FailedPrecondition, InvalidArgument
from paperworks.shared.tasks.context import JobContext

PNG = "image/png"


def device(ctx, world: int) -> str:
    """The job's device, refused (FAILED_PRECONDITION on `device`) where it cannot host `world` ranks."""
    where = ctx.device
    gpus = 0
    if str(where).startswith("cuda"):
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    try:
        placement.check(where, world, gpus)
    except placement.DeviceUnavailable as exc:
        raise FailedPrecondition(f"{exc} (the worker's PAPERWORKS_DEVICE)", "device") from None
    return where


def build(cfg, pattern: str, field: str = "model") -> MLLM:
    """The composed model under its freezing pattern; a Hugging Face folder whose weights do not
    load (missing or mis-shaped tensors) is refused naming `field`."""
    try:
        model = MLLM(cfg)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise InvalidArgument(field, f"a Hugging Face folder does not load: {exc}") from None
    return model.apply_freeze(Freeze.pattern(pattern, cfg.encoders))


def _profile(p, cfg, repeats: int, where: str = "cpu") -> tuple[MLLM, dict]:
    model = build(cfg, p.pattern)
    mb = microbatches(synthetic_batch(cfg, p.batch_size, 0), p.microbatches)[0]
    return model, costs.profile(model, mb, repeats, where)


def _check_search(modules: dict, world: int, limit: int = MAX_CANDIDATES, field: str = "world_size") -> None:
    layers = sum(modules.values())
    if world > layers:
        raise InvalidArgument(field, f"world_size ({world}) exceeds the model's {layers} pipeline layers")
    n = partition.count_candidates(modules, world)
    if n > limit:
        raise InvalidArgument(
            field, f"{n} candidate partitions exceed the planner's limit {limit}; use fewer stages or layers"
        )


def _stages_json(plan: dict) -> list[dict]:
    return [
        {
            "layers": [f"{m}:{i}" for m, i in st["layers"]],
            "next": -1 if st["next"] is None else st["next"],
            "forward": plan["stage_forward"][s],
            "backward": plan["stage_backward"][s],
            "memory_bytes": plan["stage_memory"][s],
        }
        for s, st in enumerate(plan["stages"])
    ]


def run_plan_parallelism(params: PlanParallelismParams, ctx: JobContext) -> dict:
    where = device(ctx, 1)  # profiling runs in this process, on one device
    cfg = data.config(params.model, scope=ctx)
    modules = cfg.modules()
    _check_search(modules, params.world_size)
    ctx.progress(0, 3, stage="profiling", message=f"per-layer forward / backward costs on {where}")
    _, prof = _profile(params, cfg, params.profile_repeats, where)
    ctx.progress(1, 3, stage="partitioning")
    limit = params.memory_limit_mb * 2**20 or None
    try:
        plans = {
            m: partition.partition(
                prof,
                modules,
                params.world_size,
                params.microbatches,
                m,
                memory_limit=limit if m == "frozen_aware" else None,
            )
            for m in partition.METHODS
        }
    except ValueError as exc:
        raise InvalidArgument("memory_limit_mb", str(exc)) from None
    ctx.progress(2, 3, stage="context parallelism")
    cp = {}
    if params.cp_size > 1:
        seqs = data.sequences(params.sequence)
        for mode in context.MODES:
            cp[mode] = float(
                np.mean([context.plan_split(s, params.cp_size, mode)["imbalance"] for s in seqs])
            )
    cp_mode = min(cp, key=cp.get) if cp else "none"
    best = plans["frozen_aware"]
    result = {
        "stages": _stages_json(best),
        "predicted_iteration_time": best["predicted_iteration_time"],
        "baselines": {
            m: plans[m]["predicted_iteration_time"] for m in partition.METHODS if m != "frozen_aware"
        },
        "cp_mode": cp_mode,
        "cp_imbalance": cp,
    }
    ctx.put_json(
        "plan.json",
        {
            "model": params.model.model_dump(),
            "device": where,
            "pattern": params.pattern,
            "world_size": params.world_size,
            "microbatches": params.microbatches,
            "batch_size": params.batch_size,
            "profile": prof,
            "plans": {m: {k: v for k, v in p.items() if k != "timeline"} for m, p in plans.items()},
            **result,
        },
    )
    ctx.put_artifact(
        "timeline.png",
        figures.timeline_png(best["timeline"], f"predicted 1F1B, frozen-aware ({params.pattern})"),
        PNG,
    )
    ctx.progress(3, 3, stage="done")
    return result


def run_train(params: TrainParams, ctx: JobContext) -> dict:
    if params.plan_job_id:
        saved = data.read_plan(ctx, params.plan_job_id)
        params = params.model_copy(
            update={
                "model": type(params.model).model_validate(saved["model"]),
                "pattern": saved["pattern"],
                "world_size": saved["world_size"],
                "microbatches": saved["microbatches"],
                "batch_size": saved["batch_size"],
            }
        )
        if params.world_size > TRAIN_MAX_WORLD:
            raise InvalidArgument(
                "plan_job_id",
                f"the plan has {params.world_size} stages; train runs at most {TRAIN_MAX_WORLD}",
            )
        where = device(ctx, params.world_size)
        cfg = data.config(params.model, scope=ctx)
        prof = saved["profile"]
        plan = partition.evaluate(saved["plans"]["frozen_aware"]["stages"], prof, params.microbatches)
    else:
        where = device(ctx, params.world_size)
        cfg = data.config(params.model, scope=ctx)
        _check_search(cfg.modules(), params.world_size)
        ctx.progress(0, params.steps, stage="profiling")
        _, prof = _profile(params, cfg, 5, where)
        plan = partition.partition(prof, cfg.modules(), params.world_size, params.microbatches, params.method)
    if params.plan_job_id and (cfg.llm_path or any(e.hf_path for e in cfg.encoders)):
        build(cfg, params.pattern)  # a folder that does not load is refused here, not in every worker
    task = {
        "kind": "pipeline",
        "model": cfg.to_dict(),
        "pattern": params.pattern,
        "plan": plan["stages"],
        "microbatches": params.microbatches,
        "batch_size": params.batch_size,
        "steps": params.steps,
        "lr": params.learning_rate,
        "seed": params.seed,
    }

    task["save"] = True
    pids: list[int] = []
    tokens = params.batch_size * cfg.seq_len
    reported = [0]

    def poll(records):  # cancellation arrives here; the launcher then kills every worker
        step = min(r["step"] for r in records) if all(records) else 0
        line = f"{params.world_size} worker processes, pids {' '.join(map(str, pids))}"
        if step > reported[0]:
            reported[0] = step
            line = f"{_step_message(records, tokens)} · {line}"
        ctx.progress(reported[0], params.steps, stage="training", message=line)

    ranks = launch.launch(
        task, params.world_size, poll=poll, timeout=3600, device=where, on_start=pids.extend
    )
    last = ranks[-1]
    times = last["iteration_times"][1:] or last["iteration_times"]
    measured = statistics.median(times)
    busy = [sum(end - start for _, _, start, end in r["timeline"]) for r in ranks]
    result = {
        "losses": last["losses"],
        "measured_iteration_time": measured,
        "predicted_iteration_time": plan["predicted_iteration_time"],
        "tokens_per_s": tokens / measured,
        "stage_busy_s": busy,
        "stage_bubble_s": [max(0.0, last["iteration_times"][-1] - b) for b in busy],
        "method": plan.get("method", "frozen_aware"),
        "device": where,
        "stages": _stages_json(plan),
    }
    ctx.put_json("train.json", {**result, "iteration_times": last["iteration_times"]})
    # what every rank ran, the input of a multi-node run (infra/k8s/training-ranks.yaml); without
    # the worker's folder paths (an HF composition's llm_path / hf_path name the pods' folders)
    ctx.put_json("task.json", {**task, "device": where, "model": checkpoint.public_config(cfg)})
    ctx.put_artifact(
        "timeline.png",
        figures.timeline_png([r["timeline"] for r in ranks], f"measured 1F1B, last step ({params.pattern})"),
        PNG,
    )
    weights = {name: t for r in ranks for name, t in r["state"].items()}
    ref = ctx.put_artifact(
        checkpoint.MODEL, checkpoint.to_bytes(weights, cfg, params.pattern), "application/octet-stream"
    )
    ctx.announce_model(ref, f"multimodal model trained {params.steps} steps ({params.pattern})")
    ctx.progress(params.steps, params.steps, stage="done")
    return result


def _step_message(records: list[dict], tokens: int) -> str:
    """One step's progress line: loss, tokens/s, and per stage busy / bubble time (ms)."""
    loss = records[-1].get("loss")
    elapsed = max(r["time"] for r in records)
    stages = ", ".join(
        f"s{i} {r['busy'] * 1e3:.0f}/{max(0.0, r['time'] - r['busy']) * 1e3:.0f}"
        for i, r in enumerate(records)
    )
    head = f"loss {loss:.3f} · " if loss is not None else ""
    return f"{head}{tokens / elapsed:.0f} tokens/s · busy/bubble ms per stage: {stages}"


def run_simulate(params: SimulateParams, ctx: JobContext) -> dict:
    if params.plan_job_id:
        saved = data.read_plan(ctx, params.plan_job_id)
        plan = partition.evaluate(
            saved["plans"]["frozen_aware"]["stages"],
            saved["profile"],
            params.microbatches,
            params.comm_latency,
        )
        stages, fwd, bwd = plan["stages"], plan["stage_forward"], plan["stage_backward"]
        has_b = [any(saved["profile"][f"{m}:{i}"]["needs_grad"] for m, i in st["layers"]) for st in stages]
    else:
        stages = [{"layers": [], "next": None if s.next == -1 else s.next} for s in params.stages]
        fwd = [s.forward for s in params.stages]
        bwd = [s.backward for s in params.stages]
        has_b = [b > 0 for b in bwd]
        for i, st in enumerate(stages[:-1]):
            if has_b[i] and not has_b[st["next"]]:
                raise InvalidArgument(
                    f"stages[{i}].backward", "a stage with a backward must feed one with a backward"
                )
    sim = schedule.simulate(stages, fwd, bwd, params.microbatches, params.comm_latency, has_b)
    ctx.put_artifact(
        "timeline.png", figures.timeline_png(sim["timeline"], "simulated 1F1B", unit="s", scale=1.0), PNG
    )
    ctx.put_json("simulation.json", sim)
    return {"iteration_time": sim["iteration_time"], "bubble": sim["bubble"]}
