"""Pretraining loop for UrbanFusion (arXiv 2510.13774, §3.3): minibatches of locations, two
stochastic views each, L = (1 - lambda) L_CL + lambda L_Rec (see `model.py`).

Design choices: AdamW with linear warm-up (5% of the steps) and cosine decay, gradient
clipping at 1.0, and epochs of a fresh random permutation of the locations; all draws come
from seeded generators so a run is reproducible.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from paperworks.services.urban.urbanfusion.encoder import Autocast, FeatureSet, UrbanEncoder
from paperworks.services.urban.urbanfusion.model import DEFAULT_RECONSTRUCTION_WEIGHT, urbanfusion_loss
from paperworks.shared.threads import single_thread


@dataclass(frozen=True)
class PretrainConfig:
    steps: int = 400
    batch_size: int = 256
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    reconstruction_weight: float = DEFAULT_RECONSTRUCTION_WEIGHT
    view_overlap: float = 0.0
    seed: int = 0


def batches(n: int, batch_size: int, steps: int, seed: int):
    """Index batches over fresh permutations; a batch never mixes two epochs' orders."""
    rng = np.random.default_rng(seed)
    size = min(batch_size, n)
    done = 0
    while done < steps:
        order = rng.permutation(n)
        for start in range(0, n - size + 1, size):
            if done == steps:
                return
            yield order[start:start + size]
            done += 1


def lr_factor(step: int, steps: int) -> float:
    warmup = max(1, steps // 20)
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


def pretrain(encoder: UrbanEncoder, fs: FeatureSet, config: PretrainConfig,
             on_step: Callable[[int, dict[str, float]], None] | None = None, device: str = "cpu",
             autocast: Autocast | None = None) -> list[dict[str, float]]:
    """Trains `encoder.model` in place on `device` (a job passes its `ctx.device`), where the model
    and every batch go and the model stays; returns the per-step losses. `autocast(device)`, when
    given, wraps each step's forward pass and loss only (a backward pass or optimizer step inside
    a bf16 autocast region stalls training: measured on the CPU's bf16, the contrastive loss stopped
    near 5.4 where float32 reached 3.5 in 40 steps); the contrastive logits stay float32 either way.
    The views' random draws stay on the CPU's seeded generator, so a seed draws the same views on
    any device."""
    with single_thread():
        return _pretrain(encoder, fs, config, on_step, device, autocast)


def _pretrain(encoder: UrbanEncoder, fs: FeatureSet, config: PretrainConfig,
              on_step: Callable[[int, dict[str, float]], None] | None, device: str,
              autocast: Autocast | None) -> list[dict[str, float]]:
    model = encoder.to(device, autocast).model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate,
                                  weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, config.steps))
    generator = torch.Generator().manual_seed(config.seed)
    xyz = torch.from_numpy(fs.xyz).to(device)
    features = {k: torch.from_numpy(v).to(device) for k, v in fs.features.items()}
    present = torch.from_numpy(fs.present).to(device)
    history = []
    for step, rows in enumerate(batches(len(fs), config.batch_size, config.steps, config.seed), start=1):
        idx = torch.from_numpy(rows).to(device)
        with encoder.autocast(encoder.device):
            losses = urbanfusion_loss(model, xyz[idx], {k: v[idx] for k, v in features.items()},
                                      present[idx], config.reconstruction_weight, config.view_overlap,
                                      generator)
        optimizer.zero_grad(set_to_none=True)
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        record = {k: float(v.detach()) for k, v in losses.items()}
        history.append(record)
        if on_step is not None:
            on_step(step, record)
    model.eval()
    return history
