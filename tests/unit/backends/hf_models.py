"""Tiny transformers models written to a directory from code (no hub): what `hf` backend tests
load. Shared by the backends', router's and bias service's tests (imported by path)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def byte_tokenizer(*, add_bos: bool):
    """A byte-level tokenizer (256 bytes + <s> </s> <pad>) built in code, as transformers wraps it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    specials = ["<s>", "</s>", "<pad>"]
    vocab.update({s: len(vocab) + i for i, s in enumerate(specials)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", vocab["<s>"])]
        )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def save_gpt2(directory: Path, *, positions: int = 64) -> Path:
    """A 2-layer GPT-2 with random weights and the byte tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=259, n_embd=32, n_layer=2, n_head=4, n_positions=positions,
        bos_token_id=256, eos_token_id=257,
    )  # fmt: skip
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(directory)
    byte_tokenizer(add_bos=False).save_pretrained(directory)
    return directory


def save_llama(directory: Path, *, positions: int = 64, chat_template: str | None = None) -> Path:
    """A 2-layer Llama with random weights, grouped-query attention and the byte tokenizer (BOS)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=259, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions,
        bos_token_id=256, eos_token_id=257, pad_token_id=258,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer = byte_tokenizer(add_bos=True)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(directory)
    return directory


FAMILY_CONFIGS = {
    "qwen2": {"intermediate_size": 64, "num_key_value_heads": 2},
    "mistral": {"intermediate_size": 64, "num_key_value_heads": 2},
    "gemma": {"intermediate_size": 64, "num_key_value_heads": 2, "head_dim": 8},
    "gpt_neox": {"intermediate_size": 64},
    "phi": {"intermediate_size": 64},
    "opt": {"ffn_dim": 64, "word_embed_proj_dim": 32},
}


def save_family(directory: Path, model_type: str, *, positions: int = 64) -> Path:
    """A 2-layer model of another transformers family (FAMILY_CONFIGS), random weights, byte tokenizer."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        model_type, vocab_size=259, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=positions, bos_token_id=256, eos_token_id=257, pad_token_id=258,
        **FAMILY_CONFIGS[model_type],
    )  # fmt: skip
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    byte_tokenizer(add_bos=False).save_pretrained(directory)
    return directory
