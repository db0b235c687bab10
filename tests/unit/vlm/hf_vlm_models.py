"""Tiny Hugging Face vision-language models written to a folder from code (no hub), in the format a
user's folder has: `save_pretrained(..., safe_serialization=True)` of a LlavaForConditionalGeneration
or a Qwen2VLForConditionalGeneration, a WordLevel tokenizer whose vocabulary holds the conflict
items' words, the answer words and the image token, and an image processor with small sizes.
Shared by the vlm unit and integration tests (imported as `unit.vlm.hf_vlm_models`)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# the conflict items' words (services/vlm/tinyvlm/vocab.py), the colour answers and two chat roles
WORDS = [
    *("red", "green", "blue", "yellow", "purple", "orange", "reports", ":", ";", "what", "color"),
    *("is", "the", "object", "?", "which", "shape", "circle", "square", "USER:", "ASSISTANT:"),
]
LLAVA_TEMPLATE = (
    "{% for m in messages %}USER: {% for c in m['content'] %}{% if c['type'] == 'image' %}<image> "
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endfor %} ASSISTANT:"
)


def word_tokenizer(extra: tuple[str, ...], image_token: str):
    """A whitespace WordLevel tokenizer over WORDS + `extra`, with <pad> <unk> <s> </s> and the
    image token as special tokens, wrapped as transformers wraps one."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<s>", "</s>", image_token, *extra]
    vocab = {w: i for i, w in enumerate(specials + list(WORDS))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(specials)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    return wrapped, vocab


def save_llava(folder: Path, *, chat_template: bool = True, seed: int = 0) -> Path:
    """A LLaVA: a 1-layer CLIP vision tower on 16 x 16 images (4 x 4 patches), a 2-layer Llama LM
    of width 32, its CLIPImageProcessor (PIL) and a LlavaProcessor with a chat template."""
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tokenizer, vocab = word_tokenizer((), "<image>")
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            image_size=16, patch_size=4, projection_dim=32,
        ),
        text_config=LlamaConfig(
            vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
            pad_token_id=0, bos_token_id=2, eos_token_id=3,
        ),
        image_token_index=vocab["<image>"],
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )  # fmt: skip
    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    LlavaForConditionalGeneration(config).save_pretrained(folder, safe_serialization=True)
    images = CLIPImageProcessorPil(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16})
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        patch_size=4,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=LLAVA_TEMPLATE if chat_template else None,
    )
    processor.save_pretrained(folder)
    return folder


def save_qwen2_vl(folder: Path, *, seed: int = 0) -> Path:
    """A Qwen2-VL: a 1-layer vision tower (4 x 4 patches, 2 x 2 merge), a 2-layer LM of width 32
    with M-RoPE, its Qwen2VLImageProcessor (PIL, 16..32 pixels a side) and the tokenizer, saved
    side by side as a hub folder holds them (no chat template: plain prompts)."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tokenizer, vocab = word_tokenizer(("<|vision_start|>", "<|vision_end|>"), "<|image_pad|>")
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": len(vocab), "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 256, "bos_token_id": 2, "eos_token_id": 3, "pad_token_id": 0,
            "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]},
        },
        vision_config={
            "depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2,
            "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_chans": 3,
        },
        image_token_id=vocab["<|image_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"],
        vision_end_token_id=vocab["<|vision_end|>"],
    )  # fmt: skip
    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    Qwen2VLForConditionalGeneration(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    Qwen2VLImageProcessorPil(
        min_pixels=16 * 16, max_pixels=32 * 32, patch_size=4, merge_size=2, temporal_patch_size=2
    ).save_pretrained(folder)
    return folder
