"""Frozen modality-specific feature extractors (UrbanFusion §3.1: pretrained encoders, kept frozen).

The paper feeds each modality through a frozen pretrained model (e.g. CLIP for street
view, a remote-sensing ViT for imagery) and fuses the resulting features. Such weights
cannot be downloaded here, so the extractors are pluggable by name:

- `identity` (tabular): the features as given — the usual case, where a dataset
  already holds a frozen model's embeddings per location.
- `channel_stats` (raster): per-band mean and standard deviation.
- `random_conv` (raster, default): a seeded, never-trained two-layer conv net with
  mean/max pooling, plus the band statistics — a frozen extractor whose weights
  travel in the checkpoint.

`register` adds another (e.g. one wrapping a local Hugging Face vision model).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from paperworks.services.urban.urbanfusion.errors import FieldError
from torch import nn


class Extractor:
    name: str
    kind: str  # "tabular" or "raster": the modality kind it accepts
    out_dim: int

    def __call__(self, values: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def state(self) -> dict[str, torch.Tensor]:
        return {}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        return None


class Identity(Extractor):
    name, kind = "identity", "tabular"

    def __init__(self, shape: tuple[int, ...], seed: int = 0):
        self.out_dim = int(shape[0])

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return values.astype(np.float32)


def _band_stats(values: np.ndarray) -> np.ndarray:
    flat = values.reshape(len(values), values.shape[1], -1)
    return np.concatenate([flat.mean(-1), flat.std(-1)], axis=1).astype(np.float32)


class ChannelStats(Extractor):
    name, kind = "channel_stats", "raster"

    def __init__(self, shape: tuple[int, ...], seed: int = 0):
        self.out_dim = 2 * int(shape[0])

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return _band_stats(values)


class RandomConv(Extractor):
    name, kind = "random_conv", "raster"
    width = 32

    def __init__(self, shape: tuple[int, ...], seed: int = 0):
        generator = torch.Generator().manual_seed(seed)
        bands = int(shape[0])
        self.net = nn.Sequential(
            nn.Conv2d(bands, self.width // 2, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2, ceil_mode=True),
            nn.Conv2d(self.width // 2, self.width, 3, padding=1), nn.ReLU(),
        ).requires_grad_(False)
        for p in self.net.parameters():
            fan_in = p[0].numel() if p.ndim > 1 else 1
            p.copy_(torch.randn(p.shape, generator=generator) * (2.0 / fan_in) ** 0.5 if p.ndim > 1
                    else torch.zeros(p.shape))
        self.out_dim = 2 * self.width + 2 * bands

    @torch.no_grad()
    def __call__(self, values: np.ndarray) -> np.ndarray:
        out = []
        for start in range(0, len(values), 2048):
            maps = self.net(torch.from_numpy(np.ascontiguousarray(values[start:start + 2048], np.float32)))
            out.append(torch.cat([maps.mean((2, 3)), maps.amax((2, 3))], 1).numpy())
        pooled = np.concatenate(out) if out else np.zeros((0, 2 * self.width), np.float32)
        return np.concatenate([pooled, _band_stats(values)], axis=1)

    def state(self) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self.net.state_dict().items()}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self.net.load_state_dict(state)


REGISTRY: dict[str, Callable[..., Extractor]] = {
    e.name: e for e in (Identity, ChannelStats, RandomConv)
}
DEFAULTS = {"tabular": "identity", "raster": "random_conv"}


def register(name: str, factory: Callable[..., Extractor]) -> None:
    """Adds an extractor: `factory(shape, seed) -> Extractor`."""
    REGISTRY[name] = factory


def build(name: str, kind: str, shape: tuple[int, ...], seed: int, field: str) -> Extractor:
    """The extractor registered as `name` for a `kind` modality shaped `shape`; a problem is a
    FieldError naming `field`."""
    if name not in REGISTRY:
        raise FieldError(field, f"unknown extractor {name!r} (known: {', '.join(sorted(REGISTRY))})")
    extractor = REGISTRY[name](shape, seed)
    if extractor.kind != kind:
        raise FieldError(field, f"extractor {name!r} takes {extractor.kind} modalities, not {kind}")
    return extractor
