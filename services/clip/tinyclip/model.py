"""A CLIP encoder pair behind one small interface, for the tiny model trained on the world and for
real checkpoints.

`ClipEncoder` wraps a `transformers.CLIPModel` (random-init from a tiny `CLIPConfig`, or loaded from
a user's Hugging Face folder, safetensors only) with its tokenizer and pixel normalisation, and
exposes what the clip methods need: L2-normalised image and text features, the token embeddings,
and text features computed from token embeddings (CoOp-style learnable context vectors replace the
"a photo of a" tokens: RITA, TPT and R-TPT adapt them).
"""

from __future__ import annotations

from pathlib import Path

import torch
from paperworks.services.clip import world
from paperworks.shared.threads import TRANSFORMERS_LOCK
from torch import nn
from torch.nn import functional as F
from transformers import CLIPConfig, CLIPModel

PAD, SOT = "<pad>", "<sot>"
EOT = "<eot>"
CONTEXT_LENGTH = 16


class WordTokenizer:
    """Word-level tokenizer over the world's vocabulary: <pad>=0, <sot>=1, words, <eot> last (the
    highest id, as in CLIP, so both of transformers' pooling rules find it)."""

    def __init__(self, words: tuple[str, ...] = world.VOCAB, context_length: int = CONTEXT_LENGTH):
        self.words = tuple(words)
        self.index = {w: i + 2 for i, w in enumerate(self.words)}
        self.pad_id, self.sot_id, self.eot_id = 0, 1, len(self.words) + 2
        self.vocab_size = len(self.words) + 3
        self.context_length = context_length

    def __call__(self, texts: list[str]) -> torch.Tensor:
        ids = torch.full((len(texts), self.context_length), self.pad_id, dtype=torch.long)
        for i, text in enumerate(texts):
            words = text.lower().split()
            unknown = [w for w in words if w not in self.index]
            if unknown:
                raise ValueError(f"words outside the vocabulary: {', '.join(sorted(set(unknown)))}")
            if len(words) + 2 > self.context_length:
                raise ValueError(f"text longer than {self.context_length - 2} words: {text!r}")
            row = [self.sot_id, *(self.index[w] for w in words), self.eot_id]
            ids[i, : len(row)] = torch.tensor(row)
        return ids


class HFTokenizer:
    """A CLIP tokenizer loaded from a user's folder (no download), padded to its context length."""

    def __init__(self, tokenizer, context_length: int):
        self.tok = tokenizer
        self.context_length = context_length
        self.eot_id = int(tokenizer.eos_token_id)
        self.sot_id = int(tokenizer.bos_token_id)

    def __call__(self, texts: list[str]) -> torch.Tensor:
        out = self.tok(
            list(texts),
            padding="max_length",
            max_length=self.context_length,
            truncation=True,
            return_tensors="pt",
        )
        return out["input_ids"]


def tiny_config(vocab_size: int, **overrides) -> CLIPConfig:
    """The tiny CLIP: ViT 32x32 / patch 4, 3 layers of width 64; text transformer 2 layers of
    width 64 over 16 positions; 64-d joint space."""
    v = dict(
        image_size=world.IMAGE_SIZE,
        patch_size=4,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_channels=3,
    )
    t = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=CONTEXT_LENGTH,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=vocab_size - 1,
    )
    v.update(overrides.pop("vision", {}))
    t.update(overrides.pop("text", {}))
    return CLIPConfig(
        text_config=t, vision_config=v, projection_dim=overrides.pop("projection_dim", 64), **overrides
    )


class ClipEncoder(nn.Module):
    """A CLIPModel + tokenizer + pixel normalisation. Images enter as (B, 3, H, W) floats in [0, 1]
    and are resized to the model's input size; every feature leaves L2-normalised."""

    def __init__(self, model: CLIPModel, tokenizer, mean, std, kind: str = "tiny"):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.kind = kind
        self.image_size = int(model.config.vision_config.image_size)
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1))

    @property
    def device(self) -> torch.device:
        return self.mean.device

    @property
    def logit_scale(self) -> torch.Tensor:
        return self.model.logit_scale.exp().clamp(max=100.0)

    def tokenize(self, texts: list[str]) -> torch.Tensor:
        return self.tokenizer(texts).to(self.device)

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        images = images.to(self.device, torch.float32)
        if images.shape[-1] != self.image_size or images.shape[-2] != self.image_size:
            images = F.interpolate(
                images, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False
            )
        return (images - self.mean) / self.std

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        vm = self.model.vision_model
        pooled = vm(pixel_values=self.preprocess(images)).pooler_output
        return F.normalize(self.model.visual_projection(pooled), dim=-1)

    def token_embeddings(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.text_model.embeddings.token_embedding(ids)

    def eot_positions(self, ids: torch.Tensor) -> torch.Tensor:
        return (ids == self.tokenizer.eot_id).int().argmax(-1)

    def encode_text_embeddings(self, embeds: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Text features from token embeddings (B, L, D) (some of them learnable), pooled at the
        <eot> position of `ids`; the same computation as CLIPTextModel on input ids."""
        tm = self.model.text_model
        hidden = tm.embeddings(inputs_embeds=embeds)
        length = hidden.shape[1]
        mask = torch.full((length, length), float("-inf"), device=hidden.device, dtype=hidden.dtype)
        mask = torch.triu(mask, 1)[None, None]
        out = tm.encoder(inputs_embeds=hidden, attention_mask=mask).last_hidden_state
        out = tm.final_layer_norm(out)
        pooled = out[torch.arange(out.shape[0], device=out.device), self.eot_positions(ids)]
        return F.normalize(self.model.text_projection(pooled), dim=-1)

    def encode_text(self, texts: list[str]) -> torch.Tensor:
        ids = self.tokenize(texts)
        return self.encode_text_embeddings(self.token_embeddings(ids), ids)


TINY_MEAN, TINY_STD = (0.15, 0.15, 0.15), (0.25, 0.25, 0.25)
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def build_tiny(seed: int, device: str = "cpu", **config) -> ClipEncoder:
    """A randomly initialised tiny CLIP over the world's vocabulary (pretrained=None)."""
    tok = WordTokenizer()
    torch.manual_seed(seed)
    with TRANSFORMERS_LOCK:
        model = CLIPModel(tiny_config(tok.vocab_size, **config))
    return ClipEncoder(model, tok, TINY_MEAN, TINY_STD).to(device).eval()


def load_hf_folder(path: str | Path, device: str = "cpu") -> ClipEncoder:
    """A real CLIP checkpoint in Hugging Face CLIPModel format from a local folder: config.json,
    model.safetensors (pickled .bin weights are refused) and the tokenizer files."""
    from transformers import AutoTokenizer

    path = Path(path)
    if not (path / "config.json").is_file():
        raise ValueError("the folder has no config.json")
    if not any(path.glob("*.safetensors")):
        raise ValueError("the folder has no .safetensors weights (pickled weights are not loaded)")
    with TRANSFORMERS_LOCK:
        model = CLIPModel.from_pretrained(path, use_safetensors=True, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    mean, std = OPENAI_MEAN, OPENAI_STD
    pre = path / "preprocessor_config.json"
    if pre.is_file():
        import json

        cfg = json.loads(pre.read_text())
        mean, std = tuple(cfg.get("image_mean", mean)), tuple(cfg.get("image_std", std))
    length = int(model.config.text_config.max_position_embeddings)
    return ClipEncoder(model, HFTokenizer(tok, length), mean, std, kind="hf").to(device).eval()
