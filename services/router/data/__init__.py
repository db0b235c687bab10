"""The router's inputs: the generated worlds its jobs train on, and the data and models a request names.

- `mixture`: synthetic input-expert mixtures with a controlled expert imbalance (TrainRejector
  `synthetic`);
- `text_families`: generated prompt families with simulated experts, embedded with MiniLM
  (TrainRejector `text_families`);
- `checkable`: generated checkable tasks, the SDR world (TrainDecider `tasks`);
- `prompts`: a user's own prompts and reference answers with named scorers (TrainDecider `prompts`);
- `examples`: small inputs for the README's commands and the demo (`python -m ...router.data DIR`);
- here: the splits of a TrainRejector dataset (logged outcomes included), and the local model and
  remote agents of a TrainDecider job. A model folder a request names (`model.source`: an upload of
  the folder as an archive, a router job's artifact, an s3:// object, or a server path under the
  data root, `model.path` for short) is made local by `ModelSpec.local_ref` for the job's tenant.
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
from paperworks.shared.backends import ModelBackend, ModelRef, load_backend
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import InputScope

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


# ---- TrainRejector -------------------------------------------------------------------------


def rejector_splits(params: TrainRejectorParams, device: str = "cpu") -> tuple[list[DeferralData], dict]:
    """(train, validation, test) and how the inputs are represented (texts embedded by MiniLM on
    `device`)."""
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
        pool = pool.with_features(minilm(device).embed(pool.texts))
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
        features, represent = minilm(device).embed(logged.texts), {"kind": "minilm", "dim": 384}
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


def task_source(params: TrainDeciderParams, inputs: InputScope | None = None) -> TaskSuite | PromptSuite:
    """What the traces score: the user's prompts when given (their file resolved for the tenant of
    `inputs`), else the generated suite."""
    if params.prompts is not None:
        return PromptSuite.from_params(params.prompts, params.seed, inputs)
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


def remote_agents(
    remotes: list[RemoteParams], inputs: InputScope | None = None, device: str = "cpu"
) -> list[RemoteAgent]:
    """Simulated remotes (accuracy per family) and real ones (a model the traces ask: an endpoint,
    or an hf / tiny folder made local for the tenant of `inputs` and run on `device`)."""
    return [
        RemoteAgent(
            r.name,
            r.price,
            tuple(r.accuracy) if r.model is None else None,
            local_ref(r.model, inputs, f"remotes.{i}.model", device) if r.model else None,
        )
        for i, r in enumerate(remotes)
    ]


def local_ref(spec: ModelSpec, inputs: InputScope | None, field: str, device: str) -> ModelRef:
    """The backends' reference of `spec` on `device`, its folder (if any) made local
    (`ModelSpec.local_ref`: refusals name `field`.source)."""
    return dataclasses.replace(spec.local_ref(inputs, "router", field), device=device)


def local_model(
    local: LocalModelParams,
    suite: TaskSuite | PromptSuite,
    report: Callable[[str], None],
    open_announced: OpenAnnounced | None = None,
    device: str = "cpu",
    inputs: InputScope | None = None,
) -> tuple[ModelBackend, dict, dict[str, torch.Tensor]]:
    """(backend, what the policy records about it, tensors the policy stores) of the local LM: a
    tiny LM trained here on the suite (its weights go into the policy), the model a quantizer job
    announced, or a tiny / hf model folder (hf: any AutoModelForCausalLM family the shared backend
    loads), made local for the tenant of `inputs`. The model is trained and placed on `device` (the
    job context's), and so is every batch it runs. `report` says what is being done."""
    if local.train_tiny is not None:
        tiny = local.train_tiny
        report(f"training a tiny LM for {tiny.steps} steps on {device}")
        config = dataclasses.replace(
            DEFAULT_TINY, dim=tiny.dim, n_layers=tiny.layers, mlp_hidden=int(tiny.dim * 2.75) // 8 * 8
        )
        module = train_local_tiny(suite, steps=tiny.steps, seed=tiny.seed, config=config, device=device)
        meta = {"embedded_tiny": dataclasses.asdict(config)}
        return TinyBackend(module, device=device), meta, state_with_prefix("local", module)
    if local.quantize_job_id:
        if open_announced is None:
            raise InvalidArgument("local.quantize_job_id", "a quantized local model needs the job store")
        job_id = local.quantize_job_id
        report(f"loading the 2-bit model quantizer job {job_id} announced")
        artifact, backend = open_announced("quantizer", job_id, "local.quantize_job_id")
        return backend, {"announced": {"service": "quantizer", "job_id": job_id, "artifact": artifact}}, {}
    assert local.model is not None
    report(f"loading the {local.model.label} model on {device}")
    backend = load_backend(local_ref(local.model, inputs, "local.model", device))
    return backend, {"model": local.model.model_dump()}, {}
