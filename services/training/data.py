"""What the training jobs read: the model description (spec) turned into the method's config, with
Hugging Face folders (`model.llm`, `model.encoders[i].hf`) made local for the job's tenant
(`paperworks.shared.inputs.resolve_input`: server paths under the data root, uploads and artifacts
unpacked, s3:// objects fetched) and their sizes read from their configs; the synthetic multimodal
task (`cornstarch.model.synthetic_batch`, generated, no download); synthetic sequence statistics for
the CP split (`cornstarch.context.synthetic_sequence`). A plan is read back from a plan_parallelism
job's `plan.json` artifact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from paperworks.services.training.cornstarch import context, hf
from paperworks.services.training.cornstarch.model import EncoderConfig, MLLMConfig
from paperworks.services.training.spec import HFModelSpec, ModelDesc, SequenceStats
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import archive_root, resolve_input


def source_field(spec: HFModelSpec, field: str) -> str:
    """The request field a refusal about the folder names: `model.llm.source.upload`, ...path."""
    key = next(k for k in ("upload", "artifact", "uri", "path") if getattr(spec.source, k))
    return f"{field}.source.{key}"


def hf_folder(spec: HFModelSpec, scope, field: str) -> Path:
    """The local folder of a Hugging Face model spec (an archive unpacked, a folder on top skipped)."""
    folder = resolve_input(spec.source, scope, "training", f"{field}.source", unpack=True)
    folder = archive_root(folder, lambda p: (p / "config.json").is_file())
    if not folder.is_dir():
        raise InvalidArgument(source_field(spec, field), "must be a model folder (or a .tar/.zip of one)")
    return folder


def _info(read, spec: HFModelSpec, scope, field: str) -> tuple[str, dict]:
    folder = hf_folder(spec, scope, field)
    try:
        return str(folder), read(folder)
    except (hf.HFFolderError, KeyError, ValueError, TypeError) as exc:
        shown = str(exc).replace(str(folder), "the folder")
        raise InvalidArgument(source_field(spec, field), shown) from None


def check_folders(desc: ModelDesc, scope, field: str = "model") -> None:
    """The submission-time check of every Hugging Face folder: a server path's config is read (the
    class and sizes, no weights); any other source must name an archive, checked by the worker."""
    from paperworks.shared.inputs import require_folder_archive

    specs = [(desc.llm, f"{field}.llm", hf.llm_info)] + [
        (e.hf, f"{field}.encoders[{i}].hf", hf.vision_info) for i, e in enumerate(desc.encoders)
    ]
    for spec, where, read in specs:
        if spec is None:
            continue
        if spec.source.path:
            _info(read, spec, scope, where)
            continue
        require_folder_archive(spec.source, scope, source_field(spec, where))


def config(desc: ModelDesc, seed: int = 0, scope=None, field: str = "model") -> MLLMConfig:
    """The method's config; a Hugging Face module's sizes come from its folder's config.json (no
    weights read here), which needs `scope` (a JobContext or InputScope) to resolve the folder."""
    encoders = []
    for i, e in enumerate(desc.encoders):
        d = e.model_dump(exclude={"hf"})
        if e.hf is not None:
            path, info = _info(hf.vision_info, e.hf, scope, f"{field}.encoders[{i}].hf")
            d.update(hf_path=path, **info)
        encoders.append(EncoderConfig(**d))
    sizes = {"d_model": desc.d_model, "llm_layers": desc.llm_layers, "heads": desc.heads, "vocab": desc.vocab}
    llm_path = ""
    if desc.llm is not None:
        llm_path, info = _info(hf.llm_info, desc.llm, scope, f"{field}.llm")
        sizes = {
            "d_model": info["d_model"],
            "llm_layers": info["layers"],
            "heads": info["heads"],
            "vocab": min(desc.vocab, info["vocab"]),  # synthetic text ids: inside the LM's vocabulary
        }
    return MLLMConfig(
        encoders=tuple(encoders),
        text_tokens=desc.text_tokens,
        seed=seed,
        llm_path=llm_path,
        **sizes,
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
