"""The trained model a `train` job announces (`model.safetensors`): the stages' weights merged into
one state dict of the composed multimodal model (`cornstarch.model.MLLM`; parameter names as its
modules have them), safetensors only, with the architecture and the freezing pattern as metadata.

Folders a Hugging Face composition was built from are named only by whether there were any (a
server's paths are not written into a tenant's artifact); such a checkpoint loads onto the same
folders' composition."""

from __future__ import annotations

import json
from dataclasses import replace

import torch
from paperworks.services.training.cornstarch.model import MLLM, MLLMConfig
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

FORMAT = "paperworks.training.mllm/1"
MODEL = "model.safetensors"


def public_config(cfg: MLLMConfig) -> dict:
    """The config without the worker's local folder paths."""
    clean = replace(cfg, llm_path="", encoders=tuple(replace(e, hf_path="") for e in cfg.encoders))
    return clean.to_dict()


def to_bytes(weights: dict[str, torch.Tensor], cfg: MLLMConfig, pattern: str) -> bytes:
    hf = bool(cfg.llm_path or any(e.hf_path for e in cfg.encoders))
    return st_save(
        {k: v.contiguous() for k, v in weights.items()},
        metadata={"format": FORMAT, "config": json.dumps(public_config(cfg)), "pattern": pattern,
                  "hugging_face": json.dumps(hf)},
    )


def from_bytes(data: bytes) -> tuple[MLLM, dict[str, str]]:
    """The model defined in code, with the checkpoint's weights (strict: every tensor must be
    there), and the metadata. A checkpoint of a Hugging Face composition needs its folders."""
    size = int.from_bytes(data[:8], "little")
    meta = json.loads(data[8 : 8 + size]).get("__metadata__", {}) or {}
    if meta.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} checkpoint")
    if json.loads(meta.get("hugging_face", "false")):
        raise ValueError("a Hugging Face composition: build it from its folders, then load the weights")
    model = MLLM(MLLMConfig.from_dict(json.loads(meta["config"])))
    model.load_state_dict(st_load(data), strict=True)
    return model, meta
