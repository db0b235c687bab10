"""Where a job's model and text come from, checked so that every refusal names its field.

Both arrive as an `InputRef` (`model.source`, `data.source`; `path` is short for `source.path`):
an upload (a model folder as a .tar/.tar.gz/.zip archive, text as a file or an archived folder),
a previous job's artifact, an s3:// object, or a server path under the data root
(`PAPERWORKS_QUANTIZER_DATA_ROOT` or `PAPERWORKS_DATA_ROOT`), made local by
`paperworks.shared.inputs`. Models open through the shared backends (`tiny`: the project's
decoder; `hf`: a transformers directory), whose refusals (no config, unsupported model_type,
pickle weights, no tokenizer...) become INVALID_ARGUMENT on the source's field. Text is a file,
a folder of text files, or this interpreter's standard-library sources. Quantize jobs'
checkpoints are found by job id, for the tenant who asked.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.backends import InvalidModel, load_backend
from paperworks.shared.backends.tiny_data import stdlib_texts
from paperworks.shared.backends.torch_lm import TorchCausalLM
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.devices import device as server_device  # sync RPCs and announced models
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import InputRefParams, InputScope, archive_root, is_archive, resolve_input
from paperworks.shared.job_refs import artifact_sha, finished_job

from . import checkpoint
from .distill import TokenData
from .linears import find_linears
from .spec import LocalModelSpec, QuantizeParams, TextSource

TEXT_SUFFIXES = (".txt", ".md", ".rst", ".py", ".json")
MAX_FILES = 5000
CHECKPOINT, MANIFEST = "model.safetensors", "manifest.json"


def source_field(ref: InputRefParams, field: str) -> str:
    """The request field a refusal about the input names: `model.source.upload`, `data.source.path`."""
    key = next(k for k in ("upload", "artifact", "uri", "path") if getattr(ref, k))
    return f"{field}.source.{key}"


def _refusal(spec: LocalModelSpec, folder: str, field: str, exc: InvalidModel) -> InvalidArgument:
    """The backend's refusal on the source's field, naming the input the user gave, never the
    folder an upload was unpacked to on the server."""
    reason = exc.reason if spec.source.path else exc.reason.replace(folder, f"the folder of {spec.label}")
    return InvalidArgument(source_field(spec.source, field), reason)


def open_model(spec: LocalModelSpec, scope: InputScope | None, field: str = "model",
               device: str = "cpu") -> TorchCausalLM:
    """The model's backend (float32, on `device`), or InvalidArgument saying why the folder is
    unusable. `hf` directories of any family transformers loads with AutoModelForCausalLM.
    `scope` (a JobContext or InputScope) is whose uploads and artifacts the source may name;
    a server path needs none."""
    ref = spec.local_ref(scope, "quantizer", field)
    folder = ref.path
    if not spec.source.path:  # an upload, artifact or object: perhaps packed with its folder on top
        folder = str(archive_root(Path(folder), lambda f: (f / "config.json").exists()))
    try:
        backend = load_backend(dataclasses.replace(ref, path=folder, device=device))
    except InvalidModel as exc:
        raise _refusal(spec, folder, field, exc) from None
    if not find_linears(backend.module):
        raise InvalidArgument(source_field(spec.source, field),
                              f"{spec.label} has no linear layers to quantize")
    return backend


def check_model(spec: LocalModelSpec, scope: InputScope, field: str = "model") -> None:
    """The submission-time check. A server path is looked at: cheaply for `hf` (the directory's
    files and config, no weights loaded), a full load for `tiny` models (they are small). Any
    other source must name an archive (a folder travels as one); its content is the worker's to
    check, so a large upload is not unpacked on the request path. Raises like `open_model`."""
    if not spec.source.path:
        name = _source_name(spec.source, scope, field)
        if not is_archive(name):
            raise InvalidArgument(source_field(spec.source, field),
                                  f"{name!r} is not a folder: a model folder is sent as a .tar, .tar.gz "
                                  "or .zip archive (paperworks upload and --input pack folders so)")
        return
    if spec.kind == "tiny":
        open_model(spec, scope, field)
        return
    from paperworks.shared.backends.hf import check_model_dir

    folder = spec.local_ref(scope, "quantizer", field).path
    try:
        check_model_dir(folder)
    except InvalidModel as exc:
        raise _refusal(spec, folder, field, exc) from None


def _source_name(ref: InputRefParams, scope: InputScope, field: str) -> str:
    """The file name an upload, artifact or s3:// object was given."""
    if ref.upload:
        from paperworks.shared.db.uploads import UploadStore

        return UploadStore(scope.store.db).get(scope.tenant, ref.upload, f"{field}.source.upload").name
    return ref.artifact.name if ref.artifact is not None else ref.uri.rpartition("/")[2]


def text_path(source: TextSource, scope: InputScope | None, field: str = "data") -> Path:
    """The text file or folder a request names, made local (an archived folder unpacked)."""
    resolved = resolve_input(source.source, scope, "quantizer", f"{field}.source", unpack=True)
    if not resolved.exists():
        raise InvalidArgument(source_field(source.source, field), f"{source.path} does not exist")
    return resolved


def load_texts(source: TextSource, scope: InputScope | None, field: str = "data") -> list[str]:
    if source.stdlib is not None:
        s = source.stdlib
        return stdlib_texts(max_files=s.files, max_chars=s.max_chars, seed=s.seed)
    path = text_path(source, scope, field)
    where = source_field(source.source, field)
    name = source.path or "the input"
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)[:MAX_FILES]
    texts = []
    for f in files:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            shown = f if source.path else (f.relative_to(path) if f != path else f.name)
            raise InvalidArgument(where, f"{shown} is not readable UTF-8 text: {exc}") from None
    if not any(texts):
        raise InvalidArgument(where, f"{name} holds no text ({', '.join(TEXT_SUFFIXES)} files)")
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


def packed_model(params: QuantizeParams, blob: bytes, manifest: dict, scope: InputScope, field: str,
                 device: str = "cpu") -> TorchCausalLM:
    """The quantize job's base-model backend with its packed 2-bit layers swapped in, on `device`
    (the base model's source read as the job's tenant, `scope`)."""
    backend = open_model(params.model, scope, f"{field}.model", device)
    backend.module = checkpoint.load(blob, manifest, backend.module)
    return backend


def announced_model(job, artifact: dict, scope: InputScope, field: str) -> TorchCausalLM:
    """The quantizer's `ServiceSpec.model_loader`: the packed model a Quantize job announced, for
    other services (the manifest travels inside the checkpoint's metadata); `scope` is the job's
    tenant's, whose upload the base model may be."""
    path = scope.artifacts.path(artifact["sha256"])
    return packed_model(QuantizeParams.model_validate(job.params), path.read_bytes(),
                        checkpoint.manifest_of(path), scope, field, server_device())


def read_checkpoint(artifacts: ArtifactStore, checkpoint_sha: str, manifest_sha: str) -> tuple[bytes, dict]:
    return artifacts.path(checkpoint_sha).read_bytes(), json.loads(artifacts.path(manifest_sha).read_bytes())


def write_examples(folder: Path, steps: int = 60) -> list[Path]:
    """Small inputs for the README's examples, made here with no network: a tiny decoder
    (`tiny-model/`, dim 32, one block) trained briefly on this interpreter's standard-library
    sources, the text it was trained on (`corpus.txt`) and other sources to evaluate on
    (`heldout.txt`)."""
    from paperworks.shared.backends.tiny_model import TinyConfig, save_tiny
    from paperworks.shared.backends.tiny_train import train_tiny_lm

    texts = stdlib_texts(max_files=16, max_chars=4000, seed=0)
    config = TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=64)
    model = train_tiny_lm(texts[:12], config, steps=steps, seed=0, batch_size=8).module
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.txt").write_text("\n".join(texts[:12]), encoding="utf-8")
    (folder / "heldout.txt").write_text("\n".join(texts[12:]), encoding="utf-8")
    return [save_tiny(folder / "tiny-model", model), folder / "corpus.txt", folder / "heldout.txt"]


if __name__ == "__main__":  # python -m paperworks.services.quantizer.data FOLDER
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m paperworks.services.quantizer.data FOLDER")
    import torch

    torch.set_num_threads(1)  # a model this small trains faster on one thread (7 s vs 42 s, busy 2 cores)
    for written in write_examples(Path(sys.argv[1])):
        print(written)
