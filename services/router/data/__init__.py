"""The router's inputs: the generated worlds its jobs train on, and the data and models a request names.

- `mixture`: synthetic input-expert mixtures with a controlled expert imbalance (TrainRejector
  `synthetic`);
- `text_families`: generated prompt families with simulated experts, embedded with MiniLM
  (TrainRejector `text_families`);
- `checkable`: generated checkable tasks, the SDR world (TrainDecider `tasks`);
- `prompts`: a user's own prompts and reference answers with named scorers (TrainDecider `prompts`);
- here: the splits of a TrainRejector dataset (logged outcomes included), and the local model and
  remote agents of a TrainDecider job. A server path a request names (a model directory) must lie
  under `PAPERWORKS_ROUTER_DATA_ROOT` when that is set (`paperworks.shared.inputs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch
from paperworks.services.router.checkpoint import state_with_prefix
from paperworks.services.router.data.checkable import TaskSuite
from paperworks.services.router.data.mixture import SyntheticMixture
from paperworks.services.router.data.prompts import PromptSuite
from paperworks.services.router.data.text_families import PromptPool, TextFamilies
from paperworks.services.router.mild.deferral import DeferralData
from paperworks.services.router.sdr.local_lm import DEFAULT_TINY, train_local_tiny
from paperworks.services.router.sdr.remotes import RemoteAgent
from paperworks.services.router.spec import (
    LocalModelParams,
    ModelSpec,
    RemoteParams,
    TaskSuiteParams,
    TrainDeciderParams,
    TrainRejectorParams,
)
from paperworks.shared.backends import ModelBackend, load_backend
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import server_path

__all__ = [
    "PromptPool",
    "PromptSuite",
    "SyntheticMixture",
    "TaskSuite",
    "TextFamilies",
    "local_model",
    "rejector_splits",
    "remote_agents",
    "task_suite",
]

# (service, job id, field) -> (artifact, backend) of the model that job announced (JobContext)
OpenAnnounced = Callable[[str, str, str], tuple[dict, ModelBackend]]


def checked_model(spec: ModelSpec, field: str) -> ModelSpec:
    """`spec`, refused (INVALID_ARGUMENT on `field`.path) if it names a server directory outside
    the data root."""
    if spec.path:
        server_path(spec.path, "router", f"{field}.path")
    return spec


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
    for i, agent in enumerate(logged.agents):
        if agent.model is not None:
            checked_model(agent.model, f"logged.agents.{i}.model")
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


# ---- TrainDecider --------------------------------------------------------------------------


def task_source(params: TrainDeciderParams) -> TaskSuite | PromptSuite:
    """What the traces score: the user's prompts when given, else the generated suite."""
    if params.prompts is not None:
        return PromptSuite.from_params(params.prompts, params.seed)
    return task_suite(params.tasks)


def task_suite(t: TaskSuiteParams) -> TaskSuite:
    return TaskSuite(
        families=tuple(t.families),
        max_operand=t.max_operand,
        max_len=t.max_len,
        lookup_keys=t.lookup_keys,
        known_fraction=t.known_fraction,
        table_seed=t.table_seed,
        key_zipf=t.key_zipf,
    )


def remote_agents(remotes: list[RemoteParams]) -> list[RemoteAgent]:
    """Simulated remotes (accuracy per family) and real ones (a model the traces ask)."""
    return [
        RemoteAgent(
            r.name,
            r.price,
            tuple(r.accuracy) if r.model is None else None,
            checked_model(r.model, f"remotes.{i}.model").ref() if r.model else None,
        )
        for i, r in enumerate(remotes)
    ]


def local_model(
    local: LocalModelParams,
    suite: TaskSuite | PromptSuite,
    report: Callable[[str], None],
    open_announced: OpenAnnounced | None = None,
    device: str = "cpu",
) -> tuple[ModelBackend, dict, dict[str, torch.Tensor]]:
    """(backend, what the policy records about it, tensors the policy stores) of the local LM: a
    tiny LM trained here on the suite (its weights go into the policy), the model a quantizer job
    announced, or a tiny / hf model directory on the server (hf: any AutoModelForCausalLM family the
    shared backend loads). The model, and so every batch it runs, is placed on `device` (the job
    context's; a tiny LM is trained on the CPU, as the shared trainer does, then moved). `report`
    says what is being done."""
    if local.train_tiny is not None:
        tiny = local.train_tiny
        report(f"training a tiny LM for {tiny.steps} steps")
        config = dataclasses.replace(
            DEFAULT_TINY, dim=tiny.dim, n_layers=tiny.layers, mlp_hidden=int(tiny.dim * 2.75) // 8 * 8
        )
        module = train_local_tiny(suite, steps=tiny.steps, seed=tiny.seed, config=config)
        meta = {"embedded_tiny": dataclasses.asdict(config)}
        tensors = state_with_prefix("local", module)  # taken on the CPU, before the move
        return TinyBackend(module, device=device), meta, tensors
    if local.quantize_job_id:
        if open_announced is None:
            raise InvalidArgument("local.quantize_job_id", "a quantized local model needs the job store")
        job_id = local.quantize_job_id
        report(f"loading the 2-bit model quantizer job {job_id} announced")
        artifact, backend = open_announced("quantizer", job_id, "local.quantize_job_id")
        return backend, {"announced": {"service": "quantizer", "job_id": job_id, "artifact": artifact}}, {}
    assert local.model is not None
    spec = checked_model(local.model, "local.model")
    return load_backend(dataclasses.replace(spec.ref(), device=device)), {"model": spec.model_dump()}, {}
