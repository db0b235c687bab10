"""The synthetic two-modality token stream the DPSL reproduction trains on (the paper's upcycled
VLMs see image and text tokens; here two generated "modalities" with different statistics).

A `World(seed)` fixes, per modality m in {0, 1}, a signature vector s_m and `classes` class means
mu_{m,c} in R^d_in. A sequence has one modality m, one label c and `length` tokens:

    modality 0 ("linear"):  x_t = s_0 + mu_{0,c} + sigma * eps_t
    modality 1 ("sign"):    x_t = s_1 + r_t * mu_{1,c} + sigma * eps_t,   r_t = +-1 per token and dim

so the label of modality 1 is carried by |x - s_1|, a different computation from modality 0's: a
model gains from experts that specialise by modality. The task is the sequence's label (mean-pooled
classification); the modality of each token is returned for the routing metrics and the
per-modality prior.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

MODALITIES = 2


@dataclass
class Batch:
    x: torch.Tensor  # (B, L, d_in) float32
    labels: torch.Tensor  # (B,) long
    modality: torch.Tensor  # (B,) long

    def token_modality(self) -> torch.Tensor:
        return self.modality[:, None].expand(-1, self.x.shape[1])


class World:
    def __init__(self, seed: int = 0, d_in: int = 16, classes: int = 4, length: int = 8, noise: float = 1.5):
        rng = np.random.default_rng(seed)
        self.d_in, self.classes, self.length, self.noise = d_in, classes, length, noise
        self.signature = rng.normal(0, 1.0, (MODALITIES, d_in)).astype(np.float32)
        self.means = rng.normal(0, 1.0, (MODALITIES, classes, d_in)).astype(np.float32)

    def sample(self, rng: np.random.Generator, n: int, modality_share: float = 0.5, device="cpu") -> Batch:
        modality = (rng.random(n) >= modality_share).astype(np.int64)  # share of modality 0
        labels = rng.integers(0, self.classes, n)
        mu = self.means[modality, labels][:, None, :]  # (n, 1, d)
        sign = np.where(rng.random((n, self.length, self.d_in)) < 0.5, -1.0, 1.0).astype(np.float32)
        sign = np.where(modality[:, None, None] == 1, sign, 1.0)
        eps = rng.normal(0, self.noise, (n, self.length, self.d_in)).astype(np.float32)
        x = self.signature[modality][:, None, :] + sign * mu + eps
        return Batch(
            torch.as_tensor(x, dtype=torch.float32, device=device),
            torch.as_tensor(labels, device=device),
            torch.as_tensor(modality, device=device),
        )
