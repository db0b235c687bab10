"""Where a job's model and text come from, checked so that every refusal names its field.

Models open through the shared backends (`tiny`: the project's decoder; `hf`: a transformers
Llama- or GPT-2-style directory), whose refusals (no config, unsupported model_type, pickle
weights, no tokenizer...) become INVALID_ARGUMENT on `model.path`. Text is a file, a folder
of text files, or this interpreter's standard-library sources. Every server path goes through
the platform's data-root guard (`PAPERWORKS_QUANTIZER_DATA_ROOT`, when set). Quantize jobs'
checkpoints are found by job id, for the tenant who asked.
"""

from __future__ import annotations

import json
from pathlib import Path

from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.backends import InvalidModel, ModelRef, load_backend
from paperworks.shared.backends.tiny_data import stdlib_texts
from paperworks.shared.backends.torch_lm import TorchCausalLM
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.devices import device as server_device  # sync RPCs and announced models
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import server_path
from paperworks.shared.job_refs import artifact_sha, finished_job

from . import checkpoint
from .distill import TokenData
from .linears import find_linears
from .spec import LocalModelSpec, QuantizeParams, TextSource

TEXT_SUFFIXES = (".txt", ".md", ".rst", ".py", ".json")
MAX_FILES = 5000
CHECKPOINT, MANIFEST = "model.safetensors", "manifest.json"


def open_model(source: LocalModelSpec, field: str = "model", device: str = "cpu") -> TorchCausalLM:
    """The model's backend (float32, on `device`), or InvalidArgument saying why the directory is
    unusable. `hf` directories of any family transformers loads with AutoModelForCausalLM."""
    path = server_path(source.path, "quantizer", f"{field}.path")
    try:
        backend = load_backend(ModelRef(kind=source.kind, path=str(path), device=device))
    except InvalidModel as exc:
        raise InvalidArgument(f"{field}.{exc.field or 'path'}", exc.reason) from None
    if not find_linears(backend.module):
        raise InvalidArgument(f"{field}.path", f"{source.path} has no linear layers to quantize")
    return backend


def check_model(source: LocalModelSpec, field: str = "model") -> None:
    """The submission-time check: cheap for `hf` (the directory's files and config, no weights
    loaded), a full load for `tiny` models (they are small). Raises like `open_model`."""
    if source.kind == "tiny":
        open_model(source, field)
        return
    from paperworks.shared.backends.hf import check_model_dir

    try:
        check_model_dir(str(server_path(source.path, "quantizer", f"{field}.path")))
    except InvalidModel as exc:
        raise InvalidArgument(f"{field}.{exc.field or 'path'}", exc.reason) from None


def text_path(path: str, field: str = "data.path") -> Path:
    """A text file or folder named by a request: inside the data root, and there."""
    resolved = server_path(path, "quantizer", field)
    if not resolved.exists():
        raise InvalidArgument(field, f"{path} does not exist")
    return resolved


def load_texts(source: TextSource, field: str = "data") -> list[str]:
    if source.stdlib is not None:
        s = source.stdlib
        return stdlib_texts(max_files=s.files, max_chars=s.max_chars, seed=s.seed)
    path = text_path(source.path, f"{field}.path")
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)[:MAX_FILES]
    texts = []
    for f in files:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{field}.path", f"{f} is not readable UTF-8 text: {exc}") from None
    if not any(texts):
        raise InvalidArgument(f"{field}.path", f"{path} holds no text ({', '.join(TEXT_SUFFIXES)} files)")
    return texts


def token_data(backend: TorchCausalLM, texts: list[str], seq_len: int, field: str = "data") -> TokenData:
    """The texts as one id stream (train / validation), long enough for windows of seq_len."""
    ids = [i for t in texts for i in backend.encode(t)]
    need = 20 * (seq_len + 1)
    if len(ids) < need:
        raise InvalidArgument(field, f"{len(ids)} tokens of text; at least {need} are needed "
                                     f"for windows of {seq_len}")
    return TokenData.from_ids(ids)


def quantize_job(store: JobStore, tenant: str | None, job_id: str,
                 field: str) -> tuple[QuantizeParams, str, str]:
    """(params, checkpoint sha256, manifest sha256) of the tenant's SUCCEEDED quantize job."""
    job = finished_job(store, tenant, "quantizer", job_id, field, kind="quantize")
    return (QuantizeParams.model_validate(job.params), artifact_sha(store, job_id, CHECKPOINT, field),
            artifact_sha(store, job_id, MANIFEST, field))


def packed_model(params: QuantizeParams, blob: bytes, manifest: dict, field: str,
                 device: str = "cpu") -> TorchCausalLM:
    """The quantize job's base-model backend with its packed 2-bit layers swapped in, on `device`."""
    backend = open_model(params.model, f"{field}.model", device)
    backend.module = checkpoint.load(blob, manifest, backend.module)
    return backend


def announced_model(job, artifact: dict, artifacts: ArtifactStore, field: str) -> TorchCausalLM:
    """The quantizer's `ServiceSpec.model_loader`: the packed model a Quantize job announced, for
    other services (the manifest travels inside the checkpoint's metadata)."""
    path = artifacts.path(artifact["sha256"])
    return packed_model(QuantizeParams.model_validate(job.params), path.read_bytes(),
                        checkpoint.manifest_of(path), field, server_device())


def read_checkpoint(artifacts: ArtifactStore, checkpoint_sha: str, manifest_sha: str) -> tuple[bytes, dict]:
    return artifacts.path(checkpoint_sha).read_bytes(), json.loads(artifacts.path(manifest_sha).read_bytes())
