"""Tiny Hugging Face models saved in the real format (config.json + model.safetensors), as a user's
folder would hold them: Llama- and Qwen2-style causal LMs, CLIP and SigLIP vision towers."""

from __future__ import annotations

from pathlib import Path

import torch
import transformers as tf

VISION = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    image_size=16,
    patch_size=8,
)
LLM = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=40,
    max_position_embeddings=128,
)


def save(model: torch.nn.Module, folder: Path) -> str:
    model.save_pretrained(folder, safe_serialization=True)
    return str(folder)


def llama(folder: Path, seed: int = 0, **kw) -> str:
    torch.manual_seed(seed)
    return save(tf.LlamaForCausalLM(tf.LlamaConfig(**{**LLM, **kw})), folder)


def qwen2(folder: Path, seed: int = 0, **kw) -> str:
    torch.manual_seed(seed)
    return save(tf.Qwen2ForCausalLM(tf.Qwen2Config(**{**LLM, **kw})), folder)


def clip_vision(folder: Path, seed: int = 0, **kw) -> str:
    torch.manual_seed(seed)
    return save(tf.CLIPVisionModel(tf.CLIPVisionConfig(**{**VISION, **kw})), folder)


def siglip_vision(folder: Path, seed: int = 0, **kw) -> str:
    torch.manual_seed(seed)
    return save(tf.SiglipVisionModel(tf.SiglipVisionConfig(**{**VISION, **kw})), folder)


def clip_full(folder: Path, seed: int = 0) -> str:
    """A whole CLIPModel folder (text and vision towers); the composition takes its vision tower."""
    torch.manual_seed(seed)
    text = {**VISION, "vocab_size": 50, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1}
    for key in ("image_size", "patch_size"):
        text.pop(key)
    config = tf.CLIPConfig(vision_config=VISION, text_config=text, projection_dim=16)
    return save(tf.CLIPModel(config), folder)


def composed_config(tower: str, lm: str):
    """The multimodal config composing a vision tower folder and an LM folder (sizes from them)."""
    from paperworks.services.training.cornstarch import hf
    from paperworks.services.training.cornstarch.model import EncoderConfig, MLLMConfig

    v, info = hf.vision_info(tower), hf.llm_info(lm)
    return MLLMConfig(
        encoders=(EncoderConfig(name="vision", hf_path=tower, **v),),
        d_model=info["d_model"],
        llm_layers=info["layers"],
        heads=info["heads"],
        vocab=16,
        text_tokens=8,
        llm_path=lm,
    )
