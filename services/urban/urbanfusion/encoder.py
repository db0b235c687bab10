"""A pretrained UrbanFusion encoder as one object: frozen extractors, feature normalization, the
fusion model (its saved form is `paperworks.services.urban.checkpoint`).

`features` turns a dataset's raw modality values into the model's inputs (frozen features,
z-scored with the pretraining statistics, which are also the reconstruction targets);
`embed` runs the fusion model on any subset of them.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from paperworks.services.urban.urbanfusion import extractors as ex
from paperworks.services.urban.urbanfusion.errors import FieldError
from paperworks.services.urban.urbanfusion.location import unit_vectors
from paperworks.services.urban.urbanfusion.model import FusionConfig, UrbanFusion

if TYPE_CHECKING:  # the locations x modalities container the service's data layer builds
    from paperworks.services.urban.data.dataset import Dataset


Autocast = Callable[[torch.device], AbstractContextManager]  # device -> its mixed-precision region


def _full_precision(device: torch.device) -> AbstractContextManager:
    return contextlib.nullcontext()


@dataclass(frozen=True)
class ModalitySpec:
    name: str
    kind: str
    shape: tuple[int, ...]  # raw value shape, without the location axis
    extractor: str


@dataclass
class FeatureSet:
    """Model inputs for N locations; column j of `present` is `names[j]` (0 = coordinates)."""

    names: tuple[str, ...]
    ids: np.ndarray
    lat: np.ndarray
    lon: np.ndarray
    region: np.ndarray
    features: dict[str, np.ndarray]
    present: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def xyz(self) -> np.ndarray:
        return unit_vectors(self.lat, self.lon)

    def restricted(self, use: set[str] | frozenset[str]) -> FeatureSet:
        """The same locations with only the modalities in `use` (others count as absent)."""
        keep = np.array([n in use for n in self.names])
        return replace(self, present=self.present & keep)

    def take(self, rows: np.ndarray) -> FeatureSet:
        return FeatureSet(self.names, self.ids[rows], self.lat[rows], self.lon[rows], self.region[rows],
                          {k: v[rows] for k, v in self.features.items()}, self.present[rows])


class UrbanEncoder:
    def __init__(self, specs: list[ModalitySpec], extractors: dict[str, ex.Extractor],
                 mean: dict[str, np.ndarray], std: dict[str, np.ndarray], model: UrbanFusion):
        self.specs = {s.name: s for s in specs}
        self.extractors, self.mean, self.std, self.model = extractors, mean, std, model
        self.autocast: Autocast = _full_precision

    @property
    def names(self) -> tuple[str, ...]:
        return self.model.config.names

    @property
    def dim(self) -> int:
        return self.model.config.dim

    @classmethod
    def create(cls, dataset: Dataset, extractor_names: dict[str, str], dim: int, layers: int,
               heads: int, seed: int) -> UrbanEncoder:
        """A fresh encoder for `dataset`'s modalities; normalization fitted on its present rows."""
        unknown = sorted(set(extractor_names) - set(dataset.modalities))
        if unknown:
            raise FieldError(f"extractors.{unknown[0]}", "no such modality in the dataset")
        specs, extractors, mean, std, widths = [], {}, {}, {}, []
        for name, m in dataset.modalities.items():
            if not m.present.any():
                raise FieldError(f"dataset.{name}", "present at no location")
            choice = extractor_names.get(name, ex.DEFAULTS[m.kind])
            extractor = ex.build(choice, m.kind, m.shape, seed, f"extractors.{name}")
            feats = extractor(m.values[m.present])
            specs.append(ModalitySpec(name, m.kind, m.shape, choice))
            extractors[name] = extractor
            mean[name] = feats.mean(0).astype(np.float32)
            std[name] = np.maximum(feats.std(0), 1e-3).astype(np.float32)
            widths.append((name, extractor.out_dim))
        model = UrbanFusion(FusionConfig(tuple(widths), dim=dim, layers=layers, heads=heads, seed=seed))
        return cls(specs, extractors, mean, std, model)

    def extract(self, name: str, values: np.ndarray, present: np.ndarray) -> np.ndarray:
        """Normalized frozen features (N, F) of one modality; zeros where absent."""
        out = np.zeros((len(values), self.extractors[name].out_dim), np.float32)
        if present.any():
            out[present] = (self.extractors[name](values[present]) - self.mean[name]) / self.std[name]
        return out

    def features(self, dataset: Dataset) -> FeatureSet:
        n = len(dataset)
        present = np.zeros((n, len(self.names)), bool)
        present[:, 0] = True
        features = {}
        for j, name in enumerate(self.names[1:], start=1):
            spec, m = self.specs[name], dataset.modalities.get(name)
            if m is None:
                features[name] = np.zeros((n, self.extractors[name].out_dim), np.float32)
                continue
            if m.shape != spec.shape:
                raise FieldError(f"dataset.{name}", f"values shaped {list(m.shape)}, the encoder "
                                                    f"was pretrained on {list(spec.shape)}")
            features[name] = self.extract(name, m.values, m.present)
            present[:, j] = m.present
        return FeatureSet(self.names, dataset.ids, dataset.lat, dataset.lon, dataset.region,
                          features, present)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def to(self, device: str | torch.device, autocast: Autocast | None = None) -> UrbanEncoder:
        """Moves the fusion model (what `embed` and `pretrain` run on; extractors stay numpy).
        `autocast(device)`, when given, is the mixed-precision region the model's forward passes
        run in (`embed`, and `pretrain`'s loss, never its backward pass or optimizer step)."""
        self.model.to(device)
        self.autocast = autocast or _full_precision
        return self

    @torch.no_grad()
    def embed(self, fs: FeatureSet, batch: int = 4096) -> np.ndarray:
        """(N, D) float32 embeddings computed on the model's device (in `self.autocast`); each row
        from the modalities `fs.present` marks (at least one)."""
        if not fs.present.any(axis=1).all():
            row = int(np.argmin(fs.present.any(axis=1)))
            raise FieldError(f"locations[{row}]", "has no modality to embed")
        self.model.eval()
        xyz, device = fs.xyz, self.device
        out = []
        for s in range(0, len(fs), batch):
            feats = {k: torch.from_numpy(v[s:s + batch]).to(device) for k, v in fs.features.items()}
            mask = torch.from_numpy(fs.present[s:s + batch]).to(device)
            with self.autocast(device):
                h = self.model(torch.from_numpy(xyz[s:s + batch]).to(device), feats, mask)
            out.append(h.float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)
