"""What the training jobs read: the model description (spec) turned into the method's config, the
synthetic multimodal task (`cornstarch.model.synthetic_batch`, generated, no download) and synthetic
sequence statistics for the CP split (`cornstarch.context.synthetic_sequence`). No file inputs: a
plan is read back from a plan_parallelism job's `plan.json` artifact."""

from __future__ import annotations

import json

import numpy as np
from paperworks.services.training.cornstarch import context
from paperworks.services.training.cornstarch.model import EncoderConfig, MLLMConfig
from paperworks.services.training.spec import ModelDesc, SequenceStats
from paperworks.shared.errors import InvalidArgument


def config(desc: ModelDesc, seed: int = 0) -> MLLMConfig:
    return MLLMConfig(
        encoders=tuple(EncoderConfig(**e.model_dump()) for e in desc.encoders),
        d_model=desc.d_model,
        llm_layers=desc.llm_layers,
        heads=desc.heads,
        vocab=desc.vocab,
        text_tokens=desc.text_tokens,
        seed=seed,
    )


def sequences(stats: SequenceStats) -> list[np.ndarray]:
    rng = np.random.default_rng(stats.seed)
    return [
        context.synthetic_sequence(rng, stats.seq_len, stats.modalities, stats.causal_only)
        for _ in range(stats.samples)
    ]


def read_plan(ctx, job_id: str) -> dict:
    raw, _ = ctx.job_artifact("training", job_id, "plan.json", "plan_job_id", kind="plan_parallelism")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidArgument("plan_job_id", f"plan.json is not JSON: {exc}") from None
