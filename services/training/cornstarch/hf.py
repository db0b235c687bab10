"""Hugging Face modules as Cornstarch pipeline layers (Cornstarch `MultimodalModel` composes
existing HF encoders and LLMs; Jang et al., ICML 2026, arXiv 2503.11367, Section 3).

A decoder LM folder (`LlamaForCausalLM`, `Qwen2ForCausalLM`) becomes [HFTokenEmbed (its
`embed_tokens`, the encoders' features scattered into their placeholder positions), HFDecoderLayer
x L (its decoder layers), HFNormHead (final norm, `lm_head`, the loss)]. The rotary position
embeddings are computed once per stage from the stage's first decoder layer's shared `rotary_emb`,
as `LlamaModel.forward` computes them once for all its layers (`MLLM.stage_batch`). The decoder
attends with the multimodal mask of `context.attention_mask`, passed as an additive float mask
(what both the eager and the SDPA attention of these classes accept).

A vision encoder folder (`CLIPVisionModel`, `SiglipVisionModel`, or the vision tower of a
`CLIPModel` / `SiglipModel` folder) becomes [HFVisionEmbed (patch + position embeddings, CLIP's
pre-layernorm), HFVisionLayer x L]; its features are the last encoder layer's hidden states (all
positions, CLIP's class token included; no post-layernorm), LLaVA's `vision_feature_layer=-1`.

Tied input/output embeddings are untied at composition: the embedding and the head may sit on
different stages, and a pipeline would otherwise need Megatron's embedding-gradient all-reduce.
Weights load from safetensors only; no remote code.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from paperworks.shared.threads import TRANSFORMERS_LOCK
from torch import nn

LLM_TYPES = ("llama", "qwen2")
VISION_TYPES = ("clip_vision_model", "siglip_vision_model", "clip", "siglip")


class HFFolderError(ValueError):
    """A folder that is not a usable model of the supported classes (the message says why)."""


def read_config(folder: str | Path, types: tuple[str, ...], what: str) -> dict:
    """The folder's config.json, checked: a model type of `types` and safetensors weights."""
    folder = Path(folder)
    path = folder / "config.json"
    if not path.is_file():
        raise HFFolderError(f"no config.json: not a Hugging Face {what} folder")
    try:
        config = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise HFFolderError(f"config.json is not JSON: {exc}") from None
    kind = config.get("model_type") if isinstance(config, dict) else None
    if kind not in types:
        raise HFFolderError(f"model_type {kind!r} is not a supported {what} ({', '.join(types)})")
    names = {p.name for p in folder.iterdir()}
    if not names & {"model.safetensors", "model.safetensors.index.json"}:
        raise HFFolderError("no model.safetensors (pickle weights are never loaded)")
    if kind in ("clip", "siglip"):
        config = {**config.get("vision_config", {}), "model_type": f"{kind}_vision_model", "_full": kind}
    return config


def llm_info(folder: str | Path) -> dict:
    """Sizes of a decoder LM folder from its config (no weights read)."""
    from transformers import AutoConfig

    c = read_config(folder, LLM_TYPES, "decoder LM")
    c = {**AutoConfig.for_model(c["model_type"]).to_dict(), **c}  # what the class defaults
    window = c.get("use_sliding_window") and any(t != "full_attention" for t in c.get("layer_types") or ["s"])
    if window:
        raise HFFolderError("sliding-window attention layers are not supported (the mask is dense)")
    keys = {"d_model": "hidden_size", "layers": "num_hidden_layers", "heads": "num_attention_heads"}
    return _positive(c, {**keys, "vocab": "vocab_size"})


def _positive(config: dict, keys: dict[str, str]) -> dict:
    """{ours: config[theirs]}, each a positive int (a hand-edited config fails here, by its key)."""
    out = {}
    for ours, theirs in keys.items():
        value = config.get(theirs)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise HFFolderError(f"config.json: {theirs} must be a positive integer, not {value!r}")
        out[ours] = value
    return out


def vision_info(folder: str | Path) -> dict:
    """Sizes of a vision encoder folder from its config: tokens = patches (+ CLIP's class token)."""
    from transformers import AutoConfig

    c = read_config(folder, VISION_TYPES, "vision encoder")
    defaults = AutoConfig.for_model(c["model_type"]).to_dict()
    c = {**defaults, **c}
    keys = {"d_model": "hidden_size", "layers": "num_hidden_layers", "image_size": "image_size"}
    sizes = _positive(c, {**keys, "patch_size": "patch_size", "channels": "num_channels"})
    patches = (sizes["image_size"] // sizes.pop("patch_size")) ** 2  # the conv's output grid, as HF counts
    if not patches:
        raise HFFolderError("config.json: patch_size exceeds image_size (no patches)")
    return {**sizes, "tokens": patches + (1 if c["model_type"] == "clip_vision_model" else 0)}


def _load(auto, folder: str, weights: bool):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    config._attn_implementation = "sdpa"
    if not weights:  # shapes only (the analytic cost model): on the meta device, nothing allocated
        with TRANSFORMERS_LOCK, torch.device("meta"):
            return auto.from_config(config, trust_remote_code=False)
    from paperworks.shared.backends.hf import load_pretrained

    return load_pretrained(auto, folder, config=config)[0]


def load_llm(folder: str, weights: bool = True) -> nn.Module:
    from transformers import AutoModelForCausalLM

    llm_info(folder)
    return _load(AutoModelForCausalLM, folder, weights)


def load_vision(folder: str, weights: bool = True) -> nn.Module:
    """The vision tower (a module with `embeddings` and `encoder.layers`)."""
    from transformers import AutoModel

    full = read_config(folder, VISION_TYPES, "vision encoder").get("_full")
    model = _load(AutoModel, folder, weights)
    return model.vision_model if full else model


def additive_mask(mask: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """(T, T) bool (True = attend) -> (1, 1, T, T) additive: 0 where attended, else the dtype's min."""
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)[None, None]


def untied_head(lm_head: nn.Linear, embed: nn.Embedding) -> nn.Linear:
    """`lm_head` with its own weight where it shares the embedding's (see the module docstring)."""
    if lm_head.weight is embed.weight:
        where = embed.weight.device  # meta for a shapes-only build: nothing allocated
        head = nn.Linear(lm_head.in_features, lm_head.out_features, lm_head.bias is not None, where)
        head.weight = nn.Parameter(embed.weight.detach().clone())
        if lm_head.bias is not None:
            head.bias = nn.Parameter(lm_head.bias.detach().clone())
        return head
    return lm_head


def rope(rotary: nn.Module, ref: torch.Tensor, tokens: int):
    """(cos, sin) for positions 0..tokens-1 on `ref`'s device and dtype (no parameters: no graph)."""
    with torch.no_grad():
        ids = torch.arange(tokens, device=ref.device)[None]
        return rotary(ref, position_ids=ids)


def lora_linears(module: nn.Module, rank: int, lora_cls) -> None:
    """Every nn.Linear under `module` wrapped in `lora_cls(base, rank)` (the base stays frozen)."""
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            setattr(module, name, lora_cls(child, rank))
        elif not isinstance(child, lora_cls):
            lora_linears(child, rank, lora_cls)


def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
