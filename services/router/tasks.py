"""The two training jobs as plain functions: build the data, train, evaluate, package the policy.

No Celery and no database here (`tasks.py` is the thin edge): each takes validated parameters
and a progress callback and returns the policy (metadata + tensors), the report and its PNG.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from paperworks.services.router.checkable import TaskSuite
from paperworks.services.router.decider import DeciderConfig
from paperworks.services.router.local_lm import DEFAULT_TINY, train_local_tiny
from paperworks.services.router.metrics import deferral_report
from paperworks.services.router.plots import decider_png, rejector_png
from paperworks.services.router.policy import state_with_prefix
from paperworks.services.router.rejector import (
    DEFAULT_SCALES,
    RejectorConfig,
    costs_of,
    coverage_curve,
    fit_mild,
    fit_two_stage_ce,
)
from paperworks.services.router.remotes import RemoteAgent
from paperworks.services.router.sdr import (
    HIDDEN_LAYERS,
    SPLITS,
    collect_traces,
    evaluate,
    fit_sdr,
    option_costs,
)
from paperworks.services.router.spec import TrainDeciderParams, TrainRejectorParams
from paperworks.services.router.synthetic import DeferralData, SyntheticMixture
from paperworks.services.router.text_families import PromptPool, TextFamilies
from paperworks.shared.backends import load_backend
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.errors import InvalidArgument

Progress = Callable[[int, int, str, str], None]
# (service, job id, field) -> (artifact, backend) of the model that job announced (JobContext)
OpenAnnounced = Callable[[str, str, str], tuple[dict, object]]
LOSS_NAMES = {"LOSS_TWO_STAGE_CE": "two_stage_ce", "LOSS_MILD": "mild"}


@dataclass
class TrainedPolicy:
    meta: dict
    tensors: dict[str, torch.Tensor]
    report: dict
    png: bytes
    summary: dict


# ---- TrainRejector -------------------------------------------------------------------------


def rejector_splits(params: TrainRejectorParams) -> tuple[list[DeferralData], dict]:
    """(train, validation, test) and how the inputs are represented."""
    sizes = (params.n_train, params.n_validation, params.n_test)
    if params.synthetic is not None:
        s = params.synthetic
        mixture = SyntheticMixture(
            n_experts=s.n_experts, dim=s.dim, imbalance=s.imbalance, spread=s.spread, seed=s.seed
        )
        return [mixture.sample(n, i) for i, n in enumerate(sizes)], {"kind": "features", "dim": s.dim}
    from paperworks.services.router.embed import minilm

    if params.text_families is not None:
        t = params.text_families
        pool = PromptPool.generate(t.prompts_per_family, seed=t.seed)
        pool = pool.with_features(minilm().embed(pool.texts))
        families = TextFamilies(pool, imbalance=t.imbalance, seed=t.seed)
        return [families.sample(n, i) for i, n in enumerate(sizes)], {"kind": "minilm", "dim": 384}
    logged = params.logged
    assert logged is not None
    errors = logged.errors.array()
    if errors.min() < 0 or errors.max() > 1:
        raise InvalidArgument("logged.errors", "errors must lie in [0, 1] (1 - quality for generation)")
    if logged.features is not None:
        features, represent = (
            logged.features.array().astype(np.float32),
            {"kind": "features", "dim": logged.features.shape[1]},
        )
    else:
        features, represent = minilm().embed(logged.texts), {"kind": "minilm", "dim": 384}
    data = DeferralData(
        features=features,
        errors=errors,
        alpha=np.array([a.alpha for a in logged.agents]),
        beta=np.array([a.beta for a in logged.agents]),
        agents=[a.name for a in logged.agents],
        texts=list(logged.texts) or None,
    )
    order = np.random.default_rng(params.seed).permutation(len(data))
    n_val, n_test = (max(1, round(f * len(data))) for f in (logged.validation_fraction, logged.test_fraction))
    parts = np.split(order, [len(data) - n_val - n_test, len(data) - n_test])
    return [data.subset(p) for p in parts], represent


def train_rejector(params: TrainRejectorParams, progress: Progress) -> TrainedPolicy:
    progress(0, 1, "data", f"building the {params.dataset} dataset")
    (train, validation, test), represent = rejector_splits(params)
    config = RejectorConfig(hidden=params.hidden, steps=params.steps, gamma=params.gamma, seed=params.seed)
    scales = params.margin_scales or list(DEFAULT_SCALES)
    chosen = LOSS_NAMES[params.loss]
    losses = sorted({chosen, *(LOSS_NAMES.values() if params.compare else ())}, key=lambda n: n != chosen)
    total = sum(len(scales) if name == "mild" else 1 for name in losses)
    done = 0

    def step(message: str) -> None:
        nonlocal done
        done += 1
        progress(done, total, "training", message)

    fitted = {}
    for name in losses:
        if name == "mild":
            fitted[name] = fit_mild(
                train,
                validation,
                config,
                scales,
                on_candidate=lambda i, n: step(f"MILD margin scale {i}/{n}"),
            )
        else:
            fitted[name] = fit_two_stage_ce(train, config)
            step("two-stage CE")
    agents = _agents(params, train)
    runs = {}
    for name, fit in fitted.items():
        runs[name] = {
            "margin_scale": fit.scale,
            "margins": fit.margins,
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
        "margin_scale": fit.scale,
        "margins": fit.margins,
    }
    test_report = runs[chosen]["test"]
    summary = {
        "policy_loss": chosen,
        "margin_scale": fit.scale,
        "test_deferral_loss": test_report["deferral_loss"],
        "test_balanced_deferral_loss": test_report["balanced_deferral_loss"],
        "test_system_accuracy": test_report["system_accuracy"],
        "test_coverage": test_report["coverage"],
        "test_minority_recall": test_report["recall"][int(np.argmin(np.maximum(best_counts, 1)))],
    }
    if len(runs) > 1:
        summary["baseline"] = {
            n: {"test_balanced_deferral_loss": r["test"]["balanced_deferral_loss"]}
            for n, r in runs.items()
            if n != chosen
        }
    return TrainedPolicy(
        meta, state_with_prefix("rejector", fit.module), report, rejector_png(report), summary
    )


def _agents(params: TrainRejectorParams, data: DeferralData) -> list[dict]:
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
        for n, a, b in zip(data.agents, data.alpha, data.beta, strict=True)
    ]


# ---- TrainDecider --------------------------------------------------------------------------


def train_decider(
    params: TrainDeciderParams, progress: Progress, open_announced: OpenAnnounced | None = None
) -> TrainedPolicy:
    t = params.tasks
    suite = TaskSuite(
        families=tuple(t.families),
        max_operand=t.max_operand,
        max_len=t.max_len,
        lookup_keys=t.lookup_keys,
        known_fraction=t.known_fraction,
        table_seed=t.table_seed,
        key_zipf=t.key_zipf,
    )
    remotes = [
        RemoteAgent(
            r.name,
            r.price,
            tuple(r.accuracy) if r.model is None else None,
            r.model.ref() if r.model else None,
        )
        for r in params.remotes
    ]
    total = 6 + (1 if params.query_router_baseline else 0)
    tensors: dict[str, torch.Tensor] = {}
    if params.local.train_tiny is not None:
        tiny = params.local.train_tiny
        progress(0, total, "local model", f"training a tiny LM for {tiny.steps} steps")
        config = dataclasses.replace(
            DEFAULT_TINY, dim=tiny.dim, n_layers=tiny.layers, mlp_hidden=int(tiny.dim * 2.75) // 8 * 8
        )
        module = train_local_tiny(suite, steps=tiny.steps, seed=tiny.seed, config=config)
        backend = TinyBackend(module)
        tensors.update(state_with_prefix("local", module))
        local_meta = {"embedded_tiny": dataclasses.asdict(config)}
    elif params.local.quantize_job_id:
        if open_announced is None:
            raise InvalidArgument("local.quantize_job_id", "a quantized local model needs the job store")
        job_id = params.local.quantize_job_id
        progress(0, total, "local model", f"loading the 2-bit model quantizer job {job_id} announced")
        artifact, backend = open_announced("quantizer", job_id, "local.quantize_job_id")
        local_meta = {"announced": {"service": "quantizer", "job_id": job_id, "artifact": artifact}}
    else:
        assert params.local.model is not None
        backend = load_backend(params.local.model.ref())
        local_meta = {"model": params.local.model.model_dump()}
    progress(1, total, "traces", "local answers and remote outcomes")
    traces = {}
    sizes = (params.n_train, params.n_validation, params.n_test)
    for part, (name, n) in enumerate(zip(SPLITS, sizes, strict=True)):
        traces[name] = collect_traces(
            backend, suite, remotes, n, seed=params.seed, part=part, max_new_tokens=params.max_new_tokens
        )
        progress(2 + part, total, "traces", f"{name}: {n} traces")
    costs = option_costs(remotes)
    config = DeciderConfig(
        hidden=params.hidden, steps=params.steps, components=params.components, seed=params.seed
    )
    fit = fit_sdr(traces["train"], traces["validation"], costs, config)
    progress(5, total, "decider", "decision module trained; evaluating")
    query = None
    if params.query_router_baseline:
        from paperworks.services.router.embed import minilm

        query = minilm().embed
    evaluation = evaluate(fit, traces["train"], traces["validation"], traces["test"], costs, config, query)
    progress(total, total, "report", "done")
    option_names = ["local", *[r.name for r in remotes]]
    layout = traces["train"].local.layout
    report = {
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
