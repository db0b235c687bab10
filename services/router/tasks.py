"""The router's jobs: params -> data -> method -> the policy, its report and plot.

`train_rejector` and `train_decider` are the whole jobs as plain functions (validated parameters
and a progress callback in; the policy's metadata and tensors, the report, its PNG and the
summary out), so tests and benchmarks run exactly what the service runs. `run_train_rejector` /
`run_train_decider` are the handlers the worker calls: they run the methods on `ctx.device`, read
the job's inputs as its tenant, store the artifacts, announce the policy, and turn backend
failures into platform errors (`platform_error`: retryable ones are retried by the runner).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from paperworks.services.router import data
from paperworks.services.router.checkpoint import FILE_NAME, dump_policy, state_with_prefix
from paperworks.services.router.figures import decider_png, rejector_png
from paperworks.services.router.mild.deferral import DeferralData
from paperworks.services.router.mild.metrics import deferral_report
from paperworks.services.router.mild.rejector import (
    DEFAULT_SCALES,
    DEFAULT_TAUS,
    RejectorConfig,
    costs_of,
    coverage_curve,
    fit_logit_adjusted,
    fit_mild,
    fit_two_stage_ce,
)
from paperworks.services.router.sdr.decider import DeciderConfig, fit_sdr
from paperworks.services.router.sdr.evaluation import evaluate
from paperworks.services.router.sdr.traces import HIDDEN_LAYERS, SPLITS, collect_traces, option_costs
from paperworks.services.router.spec import TrainDeciderParams, TrainRejectorParams
from paperworks.shared.backends import BackendError, platform_error
from paperworks.shared.devices import autocast
from paperworks.shared.tasks.context import JobContext

Progress = Callable[[int, int, str, str], None]
LOSS_NAMES = {
    "LOSS_TWO_STAGE_CE": "two_stage_ce",
    "LOSS_MILD": "mild",
    "LOSS_LOGIT_ADJUSTED_CE": "logit_adjusted_ce",
}


@dataclass
class TrainedPolicy:
    meta: dict
    tensors: dict[str, torch.Tensor]
    report: dict
    png: bytes
    summary: dict


# ---- the handlers ---------------------------------------------------------------------------


def run_train_rejector(params: TrainRejectorParams, ctx: JobContext) -> dict:
    return _store(_guarded(lambda: train_rejector(params, _progress(ctx), ctx.device)), ctx)


def run_train_decider(params: TrainDeciderParams, ctx: JobContext) -> dict:
    return _store(_guarded(lambda: train_decider(params, _progress(ctx), ctx)), ctx)


def _progress(ctx: JobContext) -> Progress:
    def report(step: int, total: int, stage: str, message: str) -> None:
        ctx.progress(step, total, stage=stage, message=message)

    return report


def _guarded(run) -> TrainedPolicy:
    """Backend failures (a remote or the local model) become the platform's errors."""
    try:
        return run()
    except BackendError as exc:
        raise platform_error(exc) from exc


def _store(trained: TrainedPolicy, ctx: JobContext) -> dict:
    policy = ctx.put_artifact(
        FILE_NAME, dump_policy(trained.meta, trained.tensors), "application/octet-stream"
    )
    ctx.put_json("report.json", trained.report)
    ctx.put_artifact("curves.png", trained.png, "image/png")
    ctx.announce_model(policy, f"{trained.meta['kind']} routing policy (load it with Route)")
    return {"kind": trained.meta["kind"], "policy_sha256": policy["sha256"], **trained.summary}


# ---- TrainRejector -------------------------------------------------------------------------


def train_rejector(params: TrainRejectorParams, progress: Progress, device: str = "cpu") -> TrainedPolicy:
    """The whole job; every rejector (and MiniLM, for text) runs on `device`."""
    progress(0, 1, "data", f"building the {params.dataset} dataset")
    (train, validation, test), represent = data.rejector_splits(params, device)
    config = RejectorConfig(hidden=params.hidden, steps=params.steps, gamma=params.gamma, seed=params.seed)
    scales = params.margin_scales or list(DEFAULT_SCALES)
    taus = params.logit_taus or list(DEFAULT_TAUS)
    chosen = LOSS_NAMES[params.loss]
    losses = sorted({chosen, *(LOSS_NAMES.values() if params.compare else ())}, key=lambda n: n != chosen)
    total = len(losses)
    done = 0

    def step(message: str) -> None:
        nonlocal done
        done += 1
        progress(done, total, "training", message)

    fitted = {}
    for name in losses:
        if name == "mild":
            fitted[name] = fit_mild(train, validation, config, scales, device=device)
            step(f"MILD ({len(scales)} margin scales side by side)")
        elif name == "logit_adjusted_ce":
            fitted[name] = fit_logit_adjusted(train, validation, config, taus, device=device)
            step(f"logit-adjusted CE ({len(taus)} taus side by side)")
        else:
            fitted[name] = fit_two_stage_ce(train, config, device)
            step("two-stage CE")
    agents = _agents(params, train)
    runs = {}
    for name, fit in fitted.items():
        runs[name] = {
            "margin_scale": fit.scale if name == "mild" else 0.0,
            "margins": fit.margins if name == "mild" else [0.0] * len(fit.margins),
            **({"tau": fit.scale, "logit_adjustments": fit.margins} if name == "logit_adjusted_ce" else {}),
            "selection": fit.selection,
            "validation": deferral_report(
                fit.choose(validation.features), costs_of(validation), validation.errors
            ),
            "test": deferral_report(fit.choose(test.features), costs_of(test), test.errors),
            "coverage_curve": coverage_curve(fit.module, test),
        }
    best_counts = np.bincount(costs_of(train).argmin(axis=1), minlength=len(agents)).tolist()
    report = {
        "dataset": params.dataset,
        "agents": [a["name"] for a in agents],
        "alpha": train.alpha.tolist(),
        "beta": train.beta.tolist(),
        "sizes": {"train": len(train), "validation": len(validation), "test": len(test)},
        "train_best_counts": best_counts,
        "policy_loss": chosen,
        "runs": runs,
    }
    fit = fitted[chosen]
    meta = {
        "kind": "rejector",
        "agents": agents,
        "input": represent,
        "loss": chosen,
        "hidden": params.hidden,
        "gamma": params.gamma,
        "margin_scale": runs[chosen]["margin_scale"],
        "margins": runs[chosen]["margins"],
        "tau": runs[chosen].get("tau", 0.0),
    }
    test_report = runs[chosen]["test"]
    summary = {
        "policy_loss": chosen,
        "margin_scale": runs[chosen]["margin_scale"],
        "tau": runs[chosen].get("tau", 0.0),
        "test_deferral_loss": test_report["deferral_loss"],
        "test_balanced_deferral_loss": test_report["balanced_deferral_loss"],
        "test_system_accuracy": test_report["system_accuracy"],
        "test_coverage": test_report["coverage"],
        "test_minority_recall": test_report["recall"][int(np.argmin(np.maximum(best_counts, 1)))],
    }
    if len(runs) > 1:
        summary["baseline"] = {
            n: {
                "test_balanced_deferral_loss": r["test"]["balanced_deferral_loss"],
                "test_deferral_loss": r["test"]["deferral_loss"],
            }
            for n, r in runs.items()
            if n != chosen
        }
    return TrainedPolicy(
        meta, state_with_prefix("rejector", fit.module), report, rejector_png(report), summary
    )


def _agents(params: TrainRejectorParams, train: DeferralData) -> list[dict]:
    if params.logged is not None:
        return [
            {
                "name": a.name,
                "alpha": a.alpha,
                "beta": a.beta,
                "model": a.model.model_dump() if a.model else None,
            }
            for a in params.logged.agents
        ]
    return [
        {"name": n, "alpha": float(a), "beta": float(b), "model": None}
        for n, a, b in zip(train.agents, train.alpha, train.beta, strict=True)
    ]


# ---- TrainDecider --------------------------------------------------------------------------


def train_decider(
    params: TrainDeciderParams, progress: Progress, ctx: JobContext | None = None
) -> TrainedPolicy:
    """The whole job. `ctx` (the job context, or a stand-in with the same attributes) names the
    device every model and batch runs on (the local LM's forwards under bf16 autocast on CUDA; the
    decision modules in float32), loads another job's announced model, and reads the job's
    uploads, artifacts and s3:// inputs as its tenant; without one: the CPU, server paths only."""
    device = ctx.device if ctx is not None else "cpu"
    suite = data.task_source(params, ctx)
    remotes = data.remote_agents(params.remotes, ctx, device)
    total = 6 + (1 if params.query_router_baseline else 0)
    backend, local_meta, tensors = data.local_model(
        params.local,
        suite,
        lambda message: progress(0, total, "local model", message),
        ctx.load_announced_model if ctx is not None else None,
        device,
        ctx,
    )
    progress(1, total, "traces", "local answers and remote outcomes")
    traces = {}
    sizes = (params.n_train, params.n_validation, params.n_test)
    for part, (name, n) in enumerate(zip(SPLITS, sizes, strict=True)):
        with autocast(device):
            traces[name] = collect_traces(
                backend, suite, remotes, n, seed=params.seed, part=part, max_new_tokens=params.max_new_tokens
            )
        n = len(traces[name])  # a user's prompt set gives its own split sizes
        progress(2 + part, total, "traces", f"{name}: {n} traces")
    costs = option_costs(remotes)
    config = DeciderConfig(
        hidden=params.hidden, steps=params.steps, components=params.components, seed=params.seed
    )
    fit = fit_sdr(traces["train"], traces["validation"], costs, config, device)
    progress(5, total, "decider", "decision module trained; evaluating")
    query = None
    if params.query_router_baseline:
        from paperworks.services.router.embed import minilm

        query = minilm(device).embed
    evaluation = evaluate(
        fit, traces["train"], traces["validation"], traces["test"], costs, config, query, device
    )
    progress(total, total, "report", "done")
    option_names = ["local", *[r.name for r in remotes]]
    layout = traces["train"].local.layout
    report = {
        "task_source": "prompts" if params.prompts is not None else "generated_suite",
        "options": option_names,
        "costs": costs.tolist(),
        "families": list(suite.families),
        "sizes": {n: len(tr) for n, tr in traces.items()},
        "train_quality": dict(
            zip(option_names, traces["train"].qualities.mean(axis=0).tolist(), strict=True)
        ),
        "train_quality_by_family": {
            option_names[o]: [
                float(traces["train"].qualities[traces["train"].families == f, o].mean())
                if (traces["train"].families == f).any()
                else None
                for f in range(len(suite.families))
            ]
            for o in range(len(option_names))
        },
        "validation_curve": [p.to_dict() for p in fit.validation_curve],
        "default_lambda": fit.default_lambda,
        "evaluation": evaluation,
    }
    meta = {
        "kind": "sdr",
        "options": [{"name": "local", "cost": 0.0, "model": None}]
        + [
            {"name": r.name, "cost": r.price, "model": p.model.model_dump() if p.model else None}
            for r, p in zip(remotes, params.remotes, strict=True)
        ],
        "local": local_meta,
        "layout": layout.to_dict(),
        "layers": list(HIDDEN_LAYERS),
        "max_new_tokens": params.max_new_tokens,
        "decider": {
            "dim": int(fit.module.mean.shape[0]),
            "projected": int(fit.module.projection.shape[1]),
            "hidden": params.hidden,
            "options": len(option_names),
        },
        "lambdas": fit.lambdas.tolist(),
        "validation_curve": [p.to_dict() for p in fit.validation_curve],
        "default_lambda": fit.default_lambda,
    }
    tensors.update(state_with_prefix("decider", fit.module))
    summary = {
        "areas": evaluation["areas"],
        "accept_auroc": evaluation["accept_auroc"],
        "accept_selection": evaluation["accept_selection"],
        "local_quality": evaluation["local_quality"],
        "best_quality": evaluation["best_quality"],
        "default_lambda": fit.default_lambda,
    }
    return TrainedPolicy(meta, tensors, report, decider_png(report), summary)
