"""The training jobs: thin handlers. plan_parallelism profiles the composed model under its freezing
pattern (`cornstarch.costs`), partitions it (`cornstarch.partition`: frozen-aware and the three
frozen-unaware baselines) and scores the CP split modes on synthetic sequences (`cornstarch.context`);
train runs a plan on worker processes that this job starts and reaps (`cornstarch.launch`: on
success, failure and cancellation); simulate runs the schedule simulator.

Devices: the workers run gloo on CPU tensors (a GPU-resident NCCL path is not implemented; see the
README), so `ctx.device` is not used to place the model."""

from __future__ import annotations

import statistics

import numpy as np
from paperworks.services.training import data, figures
from paperworks.services.training.cornstarch import context, costs, launch, partition, schedule
from paperworks.services.training.cornstarch.model import MLLM, Freeze, microbatches, synthetic_batch
from paperworks.services.training.spec import (
    MAX_CANDIDATES,
    TRAIN_MAX_WORLD,
    PlanParallelismParams,
    SimulateParams,
    TrainParams,
)
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

PNG = "image/png"


def _profile(p, repeats: int, on_step=None) -> tuple[MLLM, dict]:
    cfg = data.config(p.model)
    model = MLLM(cfg).apply_freeze(Freeze.pattern(p.pattern, cfg.encoders))
    mb = microbatches(synthetic_batch(cfg, p.batch_size, 0), p.microbatches)[0]
    return model, costs.profile(model, mb, repeats)


def _check_search(modules: dict, world: int, limit: int = MAX_CANDIDATES, field: str = "world_size") -> None:
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
    modules = params.model.layers()
    _check_search(modules, params.world_size)
    ctx.progress(0, 3, stage="profiling", message="per-layer forward / backward costs")
    _, prof = _profile(params, params.profile_repeats)
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
        prof = saved["profile"]
        plan = partition.evaluate(saved["plans"]["frozen_aware"]["stages"], prof, params.microbatches)
    else:
        _check_search(params.model.layers(), params.world_size)
        ctx.progress(0, params.steps, stage="profiling")
        _, prof = _profile(params, 5)
        plan = partition.partition(
            prof, params.model.layers(), params.world_size, params.microbatches, params.method
        )
    cfg = data.config(params.model)
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

    pids: list[int] = []

    def poll():  # cancellation arrives here; the launcher then kills every worker
        ctx.progress(
            0,
            params.steps,
            stage="training",
            message=f"{params.world_size} worker processes, pids {' '.join(map(str, pids))}",
        )

    ranks = launch.launch(task, params.world_size, poll=poll, timeout=3600, on_start=pids.extend)
    last = ranks[-1]
    times = last["iteration_times"][1:] or last["iteration_times"]
    measured = statistics.median(times)
    result = {
        "losses": last["losses"],
        "measured_iteration_time": measured,
        "predicted_iteration_time": plan["predicted_iteration_time"],
        "method": plan.get("method", "frozen_aware"),
        "stages": _stages_json(plan),
    }
    ctx.put_json("train.json", {**result, "iteration_times": last["iteration_times"]})
    ctx.put_artifact(
        "timeline.png",
        figures.timeline_png([r["timeline"] for r in ranks], f"measured 1F1B, last step ({params.pattern})"),
        PNG,
    )
    ctx.progress(params.steps, params.steps, stage="done")
    return result


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
