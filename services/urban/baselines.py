"""Baselines UrbanFusion is measured against (arXiv 2510.13774, §4), rebuilt in miniature.

- SatCLIP-style location encoder (Klemmer et al., 2023): a location encoder and an imagery
  encoder trained with the symmetric CLIP loss (learned temperature) to pair each
  location's coordinates with its remote-sensing features; downstream uses the location
  encoder alone. Same location encoder, widths, optimizer and steps as UrbanFusion here,
  so the comparison isolates what is learned from (coordinates <-> imagery only versus
  stochastic fusion of every modality with reconstruction).
- Concatenated features: every modality's frozen, normalized features side by side (zeros,
  i.e. the mean, where a modality is absent) plus one presence indicator per modality —
  the "no fusion" baseline. UrbanFusion's embedding has a coordinates token, so wherever the
  embedding carries coordinates the baseline gets them too (`coordinate_features`): raw
  (lat, lon), or the location encoder's own frozen random Fourier features of the point on
  the sphere (the same encoding the fusion model's learned MLP starts from).
"""
from __future__ import annotations

import numpy as np
import torch
from paperworks.services.urban.urbanfusion.encoder import FeatureSet
from paperworks.services.urban.urbanfusion.location import (
    DEFAULT_SCALES,
    LocationEncoder,
    fourier_features,
    fourier_frequencies,
)
from paperworks.services.urban.urbanfusion.model import _mlp, contrastive_loss
from paperworks.services.urban.urbanfusion.train import PretrainConfig, batches, lr_factor
from paperworks.shared.threads import single_thread
from torch import nn

IMAGERY = "imagery"


class SatCLIP(nn.Module):
    def __init__(self, image_dim: int, dim: int, scales: tuple[float, ...] = DEFAULT_SCALES, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.location = LocationEncoder(dim, scales, seed=seed)
        self.image = _mlp(image_dim, 2 * dim, dim)
        self.logit_scale = nn.Parameter(torch.tensor(1 / 0.07).log())

    @torch.no_grad()
    def embed_coordinates(self, fs: FeatureSet) -> np.ndarray:
        self.eval()
        return self.location(torch.from_numpy(fs.xyz)).numpy()


def train_satclip(fs: FeatureSet, dim: int, config: PretrainConfig, imagery: str = IMAGERY) -> SatCLIP:
    """Contrastive coordinates <-> imagery pretraining on the locations that have imagery."""
    with single_thread():
        return _train_satclip(fs, dim, config, imagery)


def _train_satclip(fs: FeatureSet, dim: int, config: PretrainConfig, imagery: str) -> SatCLIP:
    j = fs.names.index(imagery)
    rows = np.flatnonzero(fs.present[:, j])
    xyz = torch.from_numpy(fs.xyz[rows])
    image = torch.from_numpy(fs.features[imagery][rows])
    model = SatCLIP(image.shape[1], dim, seed=config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate,
                                  weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, config.steps))
    model.train()
    for batch in batches(len(rows), config.batch_size, config.steps, config.seed):
        idx = torch.from_numpy(batch)
        loss = contrastive_loss(model.location(xyz[idx]), model.image(image[idx]), model.logit_scale)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    model.eval()
    return model


def coordinate_features(fs: FeatureSet, encoding: str = "raw", scales: tuple[float, ...] = DEFAULT_SCALES,
                        seed: int = 0) -> np.ndarray:
    """(N, K) coordinates as baseline inputs: `raw` (lat, lon), or `fourier`, the frozen multi-scale
    random Fourier features of `LocationEncoder(seed=seed)` (the same frequencies as an UrbanFusion
    model built with that seed)."""
    if encoding == "raw":
        return np.stack([fs.lat, fs.lon], axis=1).astype(np.float32)
    if encoding == "fourier":
        return fourier_features(torch.from_numpy(fs.xyz), fourier_frequencies(scales, seed=seed)).numpy()
    raise ValueError(f"unknown coordinate encoding {encoding!r}")


def concatenated_features(fs: FeatureSet) -> np.ndarray:
    """(N, sum of widths + modalities) — absent modalities are zeros (the mean) with indicator 0."""
    parts = [fs.features[name] * fs.present[:, [j]] for j, name in enumerate(fs.names) if j > 0]
    return np.concatenate([*parts, fs.present[:, 1:].astype(np.float32)], axis=1)
