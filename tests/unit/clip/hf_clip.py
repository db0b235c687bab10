"""A tiny CLIP checkpoint in real Hugging Face format, built offline for tests: a
`transformers.CLIPModel` from a small `CLIPConfig` and a real byte-level BPE `CLIPTokenizer` whose
vocab.json / merges.txt cover the world's words (one merge chain per word: most words end as one
token, as common English words do in OpenAI's CLIP vocabulary; where chains compete, a word splits
into pieces, as rare words do), saved with `save_pretrained` (safetensors) beside a
preprocessor_config.json. The same folder layout as openai/clip-vit-base-patch32, 1/10000 the size."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from paperworks.services.clip import world
from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

MEAN, STD = (0.2, 0.3, 0.4), (0.5, 0.25, 0.3)
CONTEXT = 16


def _bytes_to_unicode() -> list[str]:
    """CLIP's (GPT-2's) reversible byte -> printable character table, in its order."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def write_tokenizer_files(folder: Path, words=world.VOCAB) -> None:
    """vocab.json and merges.txt of a CLIP BPE: the 256 byte symbols, each with </w>, then one
    chain of merges per word (c+i, ci+r, ... circl+e</w>)."""
    symbols = _bytes_to_unicode()
    vocab = symbols + [s + "</w>" for s in symbols]
    merges: list[str] = []
    for word in sorted(set(words) | {"photo", "of", "a"}):
        if len(word) < 2:
            continue
        parts = list(word[:-1]) + [word[-1] + "</w>"]
        left = parts[0]
        for right in parts[1:]:
            merges.append(f"{left} {right}")
            left = left + right
            if left not in vocab:
                vocab.append(left)
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(dict.fromkeys(merges)) + "\n")


def save_tiny_clip(folder: Path, seed: int = 0) -> tuple[CLIPModel, CLIPTokenizer]:
    """Writes the checkpoint folder; returns the in-memory model and tokenizer it was saved from."""
    folder.mkdir(parents=True, exist_ok=True)
    write_tokenizer_files(folder)
    tok = CLIPTokenizer(
        str(folder / "vocab.json"),
        str(folder / "merges.txt"),
        model_max_length=CONTEXT,
        pad_token="<|endoftext|>",
    )
    text = dict(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=CONTEXT,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    vision = dict(
        image_size=32,
        patch_size=8,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
    )
    torch.manual_seed(seed)
    model = CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)).eval()
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "image_processor_type": "CLIPImageProcessor",
                "image_mean": list(MEAN),
                "image_std": list(STD),
                "size": {"shortest_edge": 32},
                "crop_size": {"height": 32, "width": 32},
                "do_resize": True,
                "do_center_crop": True,
                "do_normalize": True,
                "rescale_factor": 1 / 255,
            }
        )
    )
    return model, tok
