"""The saved form of a TinyVLM (`model.safetensors`): weights as safetensors (no pickles), the
architecture and what it was trained for as JSON metadata."""

from __future__ import annotations

import json

import torch
from paperworks.services.vlm.tinyvlm import TinyVLM, VLMConfig
from paperworks.shared.checkpoints import safetensors_metadata
from paperworks.shared.errors import InvalidArgument
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

FORMAT = "paperworks.vlm.tinyvlm/1"
MODEL = "model.safetensors"


def to_bytes(model: TinyVLM, info: dict) -> bytes:
    tensors = {k: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items()}
    return st_save(
        tensors,
        metadata={"format": FORMAT, "config": json.dumps(model.config.as_dict()), "info": json.dumps(info)},
    )


def from_bytes(data: bytes, device: str, field: str = "model_job_id") -> tuple[TinyVLM, dict]:
    """(model on `device`, its info); anything but a TinyVLM checkpoint is INVALID_ARGUMENT on `field`."""
    try:
        meta = safetensors_metadata(data)
        if meta.get("format") != FORMAT:
            raise ValueError("not a TinyVLM checkpoint")
        model = TinyVLM(VLMConfig(**json.loads(meta["config"])))
        model.load_state_dict(st_load(data))
    except (ValueError, KeyError, RuntimeError, TypeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(
            field, f"the job's model.safetensors is not a TinyVLM checkpoint: {exc}"
        ) from None
    return model.to(device).eval(), json.loads(meta.get("info", "{}"))


SPATIAL_FORMAT = "paperworks.vlm.spatiolm/2"  # /2: bias-free projections, the head reads the LM


def spatial_to_bytes(model, info: dict) -> bytes:
    """A SpatioLM model (`spatiolm.train.Spatial`): the VLM under `vlm.`, the branch under
    `branch.`, the head under `head.` (absent parts are simply not stored)."""
    tensors = {}
    for prefix in ("vlm", "branch", "head"):
        part = getattr(model, prefix)
        if part is not None:
            tensors |= {
                f"{prefix}.{k}": v.detach().float().cpu().contiguous() for k, v in part.state_dict().items()
            }
    return st_save(
        tensors,
        metadata={
            "format": SPATIAL_FORMAT,
            "config": json.dumps(model.vlm.config.as_dict()),
            "info": json.dumps(info),
        },
    )


def spatial_from_bytes(data: bytes, device: str, field: str = "model_job_id"):
    """(spatiolm.train.Spatial on `device`, its info); anything else is INVALID_ARGUMENT on `field`."""
    from paperworks.services.vlm.spatiolm.model import DPTHead, SpatialConfig, SpatialVLM, SpatioBranch
    from paperworks.services.vlm.spatiolm.train import Spatial

    try:
        meta = safetensors_metadata(data)
        if meta.get("format") != SPATIAL_FORMAT:
            raise ValueError(f"not a {SPATIAL_FORMAT} checkpoint (retrain older ones)")
        raw = json.loads(meta["config"])
        config = SpatialConfig(**(raw | {"branch_layers": tuple(raw["branch_layers"])}))
        tensors = st_load(data)
        parts = {}
        for prefix, cls in (("vlm", SpatialVLM), ("branch", SpatioBranch), ("head", DPTHead)):
            state = {k[len(prefix) + 1 :]: v for k, v in tensors.items() if k.startswith(prefix + ".")}
            if state:
                parts[prefix] = cls(config)
                parts[prefix].load_state_dict(state)
                parts[prefix].to(device).eval()
        model = Spatial(parts["vlm"], parts.get("branch"), parts.get("head"))
    except (ValueError, KeyError, RuntimeError, TypeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(
            field, f"the job's model.safetensors is not a SpatioLM checkpoint: {exc}"
        ) from None
    return model, json.loads(meta.get("info", "{}"))


def parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
