"""The saved model formats: trained SEMIR segmenters and WNE denoisers as safetensors (tensors +
JSON metadata; nothing is unpickled), the inference both the jobs and the sync RPCs run with them,
and the per-structure statistics of a segmentation. `from_bytes(..., device)` loads the models onto
the device the job context (or the sync RPC's `paperworks.shared.devices.device()`) names."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch
from paperworks.services.segmenter import wne
from paperworks.services.segmenter.semir import gnn
from paperworks.services.segmenter.semir.minor import Minor, MinorParams, build_minor
from paperworks.shared.checkpoints import safetensors_metadata
from safetensors.torch import load, save
from scipy import ndimage


@dataclass
class Segmenter:
    params: MinorParams
    structures: dict[int, str]
    models: dict[int, gnn.NodeClassifier]

    def to_bytes(self) -> bytes:
        tensors = {
            f"s{k}.{n}": t.detach().cpu().contiguous()
            for k, m in self.models.items()
            for n, t in m.state_dict().items()
        }
        first = next(iter(self.models.values()))
        meta = {
            "params": self.params.as_dict(),
            "structures": {str(k): v for k, v in self.structures.items()},
            "hidden": first.hidden,
            "layers": first.layers,
        }
        return save(tensors, metadata={"semir": json.dumps(meta)})

    @classmethod
    def from_bytes(cls, data: bytes, device="cpu") -> Segmenter:
        tensors = load(data)
        meta = json.loads(safetensors_metadata(data)["semir"])
        models = {}
        for key in meta["structures"]:
            m = gnn.NodeClassifier(meta["hidden"], meta["layers"])
            m.load_state_dict({n.split(".", 1)[1]: t for n, t in tensors.items() if n.startswith(f"s{key}.")})
            models[int(key)] = m.to(device).eval()
        return cls(MinorParams(**meta["params"]), {int(k): v for k, v in meta["structures"].items()}, models)

    def segment(self, image: np.ndarray, spacing=None, threshold: float = 0.5) -> tuple[np.ndarray, Minor]:
        minor = build_minor(image, self.params, spacing)
        labels = list(self.models)
        if minor.nodes == 0:
            return np.zeros(image.shape, np.uint8), minor
        probs = np.stack([gnn.predict(self.models[k], minor) for k in labels])
        best = probs.argmax(0)
        node_label = np.where(probs.max(0) > threshold, np.array(labels)[best], 0).astype(np.uint8)
        return minor.lift(node_label).astype(np.uint8), minor


def structure_stats(labels: np.ndarray, image: np.ndarray, spacing, names: dict[int, str]) -> list[dict]:
    voxel = float(np.prod(spacing))
    out = []
    for k, name in names.items():
        mask = labels == k
        n = int(mask.sum())
        out.append(
            {
                "label": int(k),
                "name": name,
                "voxels": n,
                "volume_mm3": n * voxel,
                "components": int(ndimage.label(mask)[1]) if n else 0,
                "mean_intensity": float(image[mask].mean()) if n else 0.0,
            }
        )
    return out


@dataclass
class Denoiser:
    model: wne.Wrapped
    backbone: str
    sigma: float

    def to_bytes(self) -> bytes:
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        meta = {"backbone": self.backbone, "wrapper": self.model.wrapper, "sigma": self.sigma}
        return save(tensors, metadata={"wne": json.dumps(meta)})

    @classmethod
    def from_bytes(cls, data: bytes, device="cpu") -> Denoiser:
        meta = json.loads(safetensors_metadata(data)["wne"])
        model = wne.Wrapped(wne.BACKBONES[meta["backbone"]](), meta["wrapper"])
        model.load_state_dict(load(data))
        return cls(model.to(device).eval(), meta["backbone"], float(meta["sigma"]))

    def denoise(self, image: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return wne.denoise_volume(self.model, image)
