"""The saved form of a dense or MoE `TokenClassifier` (`dense.safetensors`, `model.safetensors`):
weights as safetensors (no pickles), the architecture, the aux-free bias and what it was trained on
(the synthetic world) as JSON metadata."""

from __future__ import annotations

import json

import torch
from paperworks.services.moe.dpsl.model import ModelConfig, TokenClassifier
from paperworks.shared.checkpoints import safetensors_metadata
from paperworks.shared.errors import InvalidArgument
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

FORMAT = "paperworks.moe.token_classifier/1"
DENSE, MODEL = "dense.safetensors", "model.safetensors"
MAX_BYTES = 512 * 1024**2


def to_bytes(model: TokenClassifier, info: dict) -> bytes:
    tensors = {k: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items()}
    return st_save(
        tensors,
        metadata={"format": FORMAT, "config": json.dumps(model.config.as_dict()), "info": json.dumps(info)},
    )


def from_bytes(data: bytes, device: str, field: str) -> tuple[TokenClassifier, dict]:
    """(model on `device`, its info); anything but a TokenClassifier checkpoint is INVALID_ARGUMENT."""
    try:
        if len(data) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        meta = safetensors_metadata(data)
        if meta.get("format") != FORMAT:
            raise ValueError("not a paperworks moe checkpoint")
        config = ModelConfig(**json.loads(meta["config"]))
        model = TokenClassifier(config)
        model.load_state_dict(st_load(data))
        info = json.loads(meta.get("info", "{}"))
    except (ValueError, KeyError, RuntimeError, TypeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(field, f"not a moe TokenClassifier checkpoint: {exc}") from None
    return model.to(device).eval(), info


def parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
