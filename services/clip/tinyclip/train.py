"""Contrastive (CLIP, Radford et al. 2021, Eq. of Fig. 3) training of the tiny CLIP on the world,
its safetensors form, and zero-shot classification.

Training draws a fresh world batch every step (captions with random attribute drops) and uses the
symmetric InfoNCE loss; identical captions in one batch share the target mass (multi-positive
targets), so a repeated partial caption is not a false negative.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import torch
from paperworks.services.clip import world
from paperworks.services.clip.tinyclip.model import ClipEncoder, WordTokenizer, build_tiny, tiny_config
from paperworks.shared.checkpoints import safetensors_metadata
from paperworks.shared.threads import TRANSFORMERS_LOCK
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch.nn import functional as F
from transformers import CLIPConfig, CLIPModel

FORMAT = "paperworks.clip.tinyclip/1"


def contrastive_loss(img: torch.Tensor, txt: torch.Tensor, scale: torch.Tensor, texts: list[str]):
    logits = scale * img @ txt.T
    same = torch.tensor([[a == b for b in texts] for a in texts], dtype=torch.float32, device=img.device)
    target = same / same.sum(1, keepdim=True)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def train_clip(
    encoder: ClipEncoder,
    steps: int,
    seed: int,
    batch: int = 128,
    lr: float = 2e-3,
    on_step: Callable[[int, float], None] | None = None,
    crop: float = 0.3,
) -> float:
    """`steps` AdamW steps (cosine schedule, 5% warm-up) on fresh world batches; world seeds are
    `seed * 1_000_000 + step`. A fraction `crop` of each batch is seen as a random resized crop
    (area 0.5-1, as CLIP's own training crops), so the model knows zoomed views. Returns the mean
    loss over the last tenth of the steps."""
    opt = torch.optim.AdamW(encoder.model.parameters(), lr=lr, weight_decay=0.05)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + np.cos(np.pi * min(1.0, s / max(1, steps))))
    )
    encoder.train()
    losses = []
    for step in range(1, steps + 1):
        w = world.make_world(batch, seed * 1_000_000 + step, drop_captions=True)
        gen = torch.Generator().manual_seed(seed * 1_000_000 + step)
        img = encoder.encode_image(random_crops(w.images, crop, gen))
        txt = encoder.encode_text(w.captions)
        loss = contrastive_loss(img, txt, encoder.logit_scale, w.captions)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(encoder.model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    encoder.eval()
    return float(np.mean(losses[-max(1, steps // 10) :]))


def random_crops(
    images: torch.Tensor, fraction: float, gen: torch.Generator, scale: tuple[float, float] = (0.5, 1.0)
) -> torch.Tensor:
    """A random `fraction` of the images replaced by square random resized crops (no flips: the
    captions name positions)."""
    n = len(images)
    pick = torch.rand(n, generator=gen) < fraction
    k = int(pick.sum())
    if k == 0:
        return images
    side = torch.empty(k).uniform_(*scale, generator=gen).sqrt()
    theta = torch.zeros(k, 2, 3)
    theta[:, 0, 0] = theta[:, 1, 1] = side
    theta[:, :, 2] = (torch.rand(k, 2, generator=gen) * 2 - 1) * (1 - side)[:, None]
    sub = images[pick]
    grid = F.affine_grid(theta.to(sub.dtype), list(sub.shape), align_corners=False)
    out = images.clone()
    out[pick] = F.grid_sample(sub, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out


@torch.no_grad()
def zero_shot_accuracy(
    encoder: ClipEncoder, images: torch.Tensor, labels, prompts: list[str], batch: int = 512
) -> float:
    text = encoder.encode_text(prompts)
    pred = torch.cat(
        [
            (encoder.encode_image(images[i : i + batch]) @ text.T).argmax(1).cpu()
            for i in range(0, len(images), batch)
        ]
    )
    return float((pred.numpy() == np.asarray(labels)).mean())


def to_bytes(encoder: ClipEncoder, info: dict | None = None) -> bytes:
    """The tiny CLIP as safetensors: weights, with the CLIPConfig and vocabulary as metadata."""
    tensors = {k: v.detach().float().cpu().contiguous() for k, v in encoder.model.state_dict().items()}
    meta = {
        "format": FORMAT,
        "config": encoder.model.config.to_json_string(),
        "vocab": json.dumps(list(encoder.tokenizer.words)),
        "info": json.dumps(info or {}),
    }
    return st_save(tensors, metadata=meta)


def from_bytes(data: bytes, device: str = "cpu") -> tuple[ClipEncoder, dict]:
    """(encoder on `device`, info) from `to_bytes` output; ValueError on anything else."""
    meta = safetensors_metadata(data)
    if meta.get("format") != FORMAT:
        raise ValueError("not a tiny CLIP checkpoint")
    config = CLIPConfig.from_dict(json.loads(meta["config"]))
    tok = WordTokenizer(tuple(json.loads(meta["vocab"])))
    enc = build_tiny(0)
    with TRANSFORMERS_LOCK:
        enc.model = CLIPModel(config)
    enc.tokenizer = tok
    missing, unexpected = enc.model.load_state_dict(st_load(data), strict=False)
    if [m for m in missing if "position_ids" not in m] or unexpected:
        raise ValueError(
            f"weights do not match the config (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )
    return enc.to(device).eval(), json.loads(meta.get("info", "{}"))


__all__ = ["contrastive_loss", "from_bytes", "tiny_config", "to_bytes", "train_clip", "zero_shot_accuracy"]
