"""The location encoder: coordinates -> one token (UrbanFusion §3.1, after SatCLIP's encoder).

UrbanFusion (arXiv 2510.13774) encodes coordinates with SatCLIP's location encoder
(spherical-harmonic basis + SIREN). Design choice here: multi-scale random Fourier
features of the point on the unit sphere, `[sin(Bx), cos(Bx)]` with `x` the 3-D unit
vector and the columns of `B` drawn from N(0, s^2 I) for log-spaced scales s (Tancik
et al., 2020), followed by an MLP. Spherical harmonics resolve a length scale of about
pi / L radians, so street-to-city scales (1e-4 rad) would need degree L in the
thousands; Gaussian frequencies up to s ~ 5000 / rad reach them at a fixed cost, and
the 3-D embedding keeps the encoder continuous across the date line and poles.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

DEFAULT_SCALES = (3.0, 30.0, 300.0, 1000.0, 3000.0)


def unit_vectors(lat_deg: np.ndarray, lon_deg: np.ndarray) -> np.ndarray:
    """(N, 3) float64 points on the unit sphere."""
    lat, lon = np.radians(lat_deg), np.radians(lon_deg)
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=1)


def fourier_frequencies(scales: tuple[float, ...] = DEFAULT_SCALES, per_scale: int = 32,
                        seed: int = 0) -> torch.Tensor:
    """(3, per_scale * len(scales)) float64 frequency matrix B, drawn from a generator seeded by `seed`."""
    generator = torch.Generator().manual_seed(seed)
    blocks = [torch.randn(3, per_scale, generator=generator, dtype=torch.float64) * s for s in scales]
    return torch.cat(blocks, dim=1)


def fourier_features(xyz: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """[sin(xB), cos(xB)]: phases in float64 (large frequencies), features in float32."""
    phase = xyz.to(torch.float64) @ frequencies
    return torch.cat([phase.sin(), phase.cos()], dim=-1).float()


class LocationEncoder(nn.Module):
    def __init__(self, dim: int, scales: tuple[float, ...] = DEFAULT_SCALES, per_scale: int = 32,
                 seed: int = 0):
        super().__init__()
        self.register_buffer("frequencies", fourier_frequencies(scales, per_scale, seed))
        features = 2 * self.frequencies.shape[1]
        self.mlp = nn.Sequential(nn.Linear(features, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def fourier(self, xyz: torch.Tensor) -> torch.Tensor:
        return fourier_features(xyz, self.frequencies)

    def forward(self, xyz: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.fourier(xyz))
