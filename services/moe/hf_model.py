"""Hugging Face causal LMs in the moe service: the dense `base` an upcycle job reads (a
`paperworks.v1.ModelSpec` of kind hf: an upload of the folder as an archive, an earlier moe job's
artifact, an s3:// object or a server path), the upcycled MoE written with save_pretrained
(safetensors only) plus the base's tokenizer and packed as the `model.tar` artifact every `hf`
model reference accepts, and the service's `model_loader`, which opens that announced MoE for
other services (`paperworks.shared.announced`).

Folders are checked before transformers sees them (`paperworks.shared.backends.hf`: config,
safetensors only, a tokenizer, no remote code); every refusal names the request field.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path

import torch
from paperworks.services.moe.data import HF_ARCHIVE as ARCHIVE
from paperworks.services.moe.hf_upcycle import moe_type_of
from paperworks.services.moe.spec import HFModelSpec
from paperworks.shared.backends.errors import InvalidModel
from paperworks.shared.errors import FailedPrecondition, InvalidArgument
from paperworks.shared.inputs import (
    InputRefParams,
    InputScope,
    archive_root,
    require_folder_archive,
    resolve_input,
)

PROBE_SEQUENCES, PROBE_LENGTH = 4, 32


def source_field(spec: HFModelSpec, field: str) -> str:
    """The request field a refusal about the folder names: `base.source.upload`, `base.source.path`."""
    key = next(k for k in ("upload", "artifact", "uri", "path") if getattr(spec.source, k))
    return f"{field}.source.{key}"


def _family(config: dict, where: str) -> None:
    try:
        moe_type_of(config.get("model_type"))
    except ValueError as exc:
        raise InvalidArgument(where, str(exc)) from None


def check_base(spec: HFModelSpec, scope: InputScope, field: str = "base") -> None:
    """The submission-time check: a server path's folder is looked at (files and config, no
    weights); any other source must name an archive, whose content the worker checks."""
    from paperworks.shared.backends.hf import check_model_dir

    where = source_field(spec, field)
    if not spec.source.path:
        require_folder_archive(spec.source, scope, where)
        return
    folder = spec.local_ref(scope, "moe", field).path
    try:
        _family(check_model_dir(folder), where)
    except InvalidModel as exc:
        raise InvalidArgument(where, exc.reason) from None


def _folder(ref: InputRefParams, scope: InputScope, field: str) -> Path:
    """The folder `ref` names, made local (an archive unpacked); refusals name `field`.<source>."""
    folder = resolve_input(ref, scope, "moe", field, unpack=True)
    return folder if ref.path else archive_root(folder, lambda f: (f / "config.json").exists())


def open_folder(folder: Path, device: str, where: str, shown: str):
    """The HFBackend (float32) of a checked folder of an upcycled family; refusals on `where`,
    naming `shown`, never the server folder an upload was unpacked to."""
    from paperworks.shared.backends.hf import HFBackend, check_model_dir

    try:
        config = check_model_dir(folder)
        return config, HFBackend.from_dir(folder, device=device)
    except InvalidModel as exc:
        raise InvalidArgument(where, exc.reason.replace(str(folder), shown)) from None


def open_base(spec: HFModelSpec, scope: InputScope, device: str, field: str = "base"):
    """The dense model's backend (module and tokenizer) on `device`, its family checked first."""
    from paperworks.shared.backends.hf import check_model_dir

    where = source_field(spec, field)
    folder = _folder(spec.source, scope, f"{field}.source")
    shown = spec.source.path or f"the folder of {spec.label}"
    try:
        _family(check_model_dir(folder), where)
    except InvalidModel as exc:
        raise InvalidArgument(where, exc.reason.replace(str(folder), shown)) from None
    return open_folder(folder, device, where, shown)[1]


def save_archive(moe: torch.nn.Module, tokenizer) -> bytes:
    """The MoE folder as an uncompressed tar (weights do not compress): save_pretrained
    (safetensors) and the base's tokenizer, the files at the archive's top."""
    with tempfile.TemporaryDirectory(prefix="moe-hf-") as tmp:
        folder = Path(tmp)
        moe.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for path in sorted(folder.iterdir()):
                tar.add(path, arcname=path.name, recursive=False)
        return buffer.getvalue()


@torch.no_grad()
def probe(dense: torch.nn.Module, moe: torch.nn.Module, vocab: int, max_length: int, seed: int) -> dict:
    """How far the MoE is from the dense model on seeded random token sequences: the largest
    absolute logit difference and the mean KL(dense || MoE) per token (nats)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (PROBE_SEQUENCES, min(PROBE_LENGTH, max_length)), generator=gen)
    device = next(dense.parameters()).device
    a = dense(input_ids=ids.to(device), use_cache=False).logits.float()
    b = moe(input_ids=ids.to(device), use_cache=False).logits.float()
    kl = torch.nn.functional.kl_div(b.log_softmax(-1), a.log_softmax(-1), log_target=True, reduction="none")
    return {"max_logit_difference": float((a - b).abs().max()), "mean_kl": float(kl.sum(-1).mean())}


def announced_model(job, artifact: dict, scope: InputScope, field: str):
    """The moe service's `ServiceSpec.model_loader`: the HF MoE an upcycle job with a `base` (or a
    train_moe job of one) announced, as a language-model backend on this process's device. The
    service's other announced models (TokenClassifier MoEs, skill policies) are no language
    models: refused."""
    from paperworks.shared.devices import device

    if artifact.get("name") != ARCHIVE:
        raise FailedPrecondition(
            f"moe job {job.id} ({job.kind}) announced {artifact.get('name')}, not a Hugging Face MoE "
            "language model (upcycle jobs with a base announce model.tar)",
            field,
        )
    return open_moe(job.id, scope, device(), field)[1]


def open_moe(job_id: str, scope: InputScope, device: str, field: str):
    """(config, backend) of the Hugging Face MoE (model.tar) of the scope's tenant's moe job."""
    folder = _folder(InputRefParams(artifact={"job_id": job_id, "name": ARCHIVE}), scope, field)
    return open_folder(folder, device, field, f"moe job {job_id}'s {ARCHIVE}")
