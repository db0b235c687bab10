"""Saved forms: the tiny base LM (`base_lm.safetensors`: Llama weights, its transformers config as
metadata), a trained arm (`generator.safetensors`: GNN, generator, L, R, soft-token MLP; its
settings as metadata), and a user's Hugging Face causal LM folder (safetensors only, never a
pickle). Malformed bytes are INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from paperworks.services.graph import runs
from paperworks.services.graph.gara import GaRAModel
from paperworks.shared.checkpoints import safetensors_metadata
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.threads import TRANSFORMERS_LOCK
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

LM_FORMAT = "paperworks.graph.tiny_llama/1"
FORMAT = "paperworks.graph.gara/1"
GENERATOR = "generator.safetensors"
BASE_LM = "base_lm.safetensors"


def lm_to_bytes(lm) -> bytes:
    tensors = {k: v.detach().float().cpu().contiguous() for k, v in lm.state_dict().items()}
    return st_save(tensors, metadata={"format": LM_FORMAT, "config": lm.config.to_json_string()})


def lm_from_bytes(data: bytes, device: str, field: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    try:
        meta = safetensors_metadata(data)
        if meta.get("format") != LM_FORMAT:
            raise ValueError("not the graph service's tiny LM")
        with TRANSFORMERS_LOCK:
            lm = LlamaForCausalLM(LlamaConfig.from_dict(json.loads(meta["config"])))
        lm.load_state_dict(st_load(data))
    except (ValueError, KeyError, RuntimeError, TypeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(field, f"not a usable base_lm.safetensors: {exc}") from None
    lm.to(device).eval()
    for p in lm.parameters():
        p.requires_grad_(False)
    return lm


class HFTokenizer:
    """A transformers tokenizer behind the interface `world.WordTokenizer` has."""

    def __init__(self, tok):
        self.tok = tok
        self.bos_id = tok.bos_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)

    def encode(self, text: str, bos: bool = True) -> list[int]:
        ids = self.tok.encode(text if bos else " " + text, add_special_tokens=False)
        return ([self.bos_id] if bos and self.bos_id is not None else []) + ids


def load_user_lm(folder: Path, device: str, field: str):
    """(frozen LM, tokenizer) from a Hugging Face causal LM folder with safetensors weights."""
    if not folder.is_dir() or not list(folder.glob("*.safetensors")):
        raise InvalidArgument(
            field, "must be a folder (or archive) with config.json, *.safetensors and a tokenizer"
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with TRANSFORMERS_LOCK:
            lm = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True, local_files_only=True)
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise InvalidArgument(field, f"not a loadable causal LM folder: {exc}") from None
    lm.to(device).eval()
    for p in lm.parameters():
        p.requires_grad_(False)
    return lm, HFTokenizer(tok)


def generator_to_bytes(model: GaRAModel, settings: dict) -> bytes:
    tensors = {k: v.float().cpu().contiguous() for k, v in model.trainable_state().items()}
    tensors = tensors or {"empty": torch.zeros(1)}
    return st_save(tensors, metadata={"format": FORMAT, "settings": json.dumps(settings)})


def generator_settings(data: bytes, field: str) -> dict:
    try:
        meta = safetensors_metadata(data)
        if meta.get("format") != FORMAT:
            raise ValueError("not a GaRA generator")
        return json.loads(meta["settings"])
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        raise InvalidArgument(field, f"not a usable generator.safetensors: {exc}") from None


def generator_from_bytes(data: bytes, lm, device: str, field: str) -> GaRAModel:
    """The trained arm around a copy of `lm` (the base LM it was trained on)."""
    s = generator_settings(data, field)
    model = runs.build(lm, s["arm"], s["rank"], s["hidden"], s["targets"], s["seed"], device)
    state = {k: v for k, v in st_load(data).items() if k != "empty"}
    try:
        model.load_trainable_state(state)
    except (KeyError, RuntimeError) as exc:
        raise InvalidArgument(field, f"generator does not fit its base LM: {exc}") from None
    return model.eval()
