"""Routing metrics of an MoE layer (the quantities DPSL is judged by, arXiv 2510.01185 Sec. 5):
per-expert load (share of the N*k top-k slots), max/mean load, confidence (mean max routing
probability), routing entropy (nats), the per-expert CvM distance to a Beta marginal, and the mutual
information between a token's modality and its top-1 expert (bits)."""

from __future__ import annotations

import numpy as np
import torch

from .losses import DPSL


def mutual_information(a: np.ndarray, b: np.ndarray) -> float:
    """I(A; B) in bits from paired discrete samples."""
    joint = np.zeros((int(a.max()) + 1, int(b.max()) + 1))
    np.add.at(joint, (a, b), 1.0)
    joint /= joint.sum()
    pa, pb = joint.sum(1, keepdims=True), joint.sum(0, keepdims=True)
    nz = joint > 0
    return float((joint[nz] * np.log2(joint[nz] / (pa @ pb)[nz])).sum())


def entropy_bits(a: np.ndarray) -> float:
    p = np.bincount(a) / len(a)
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def routing_metrics(record: dict, modality: torch.Tensor | None = None, prior=None) -> dict:
    """Metrics of one layer's routing record; `prior`: per-expert alphas (default: alpha = 1 each)
    for the CvM distance column."""
    probs = record["probs"].detach().double()
    selected = record["selected"].detach()
    n, e = probs.shape
    load = torch.bincount(selected.reshape(-1), minlength=e).double() / selected.numel()
    entropy = -(probs * probs.clamp_min(1e-12).log()).sum(1)
    dpsl = DPSL(prior if prior is not None else [1.0] * e, probs.device)
    _, cvm = dpsl(probs)
    out = {
        "load": load.tolist(),
        "max_mean_load": float(load.max() * e),
        "confidence": float(probs.max(1).values.mean()),
        "entropy": float(entropy.mean()),
        "mean_probability": probs.mean(0).tolist(),
        "expert_confidence": [
            float(probs[selected[:, 0] == k, k].mean()) if (selected[:, 0] == k).any() else 0.0
            for k in range(e)
        ],
        "cvm": cvm.tolist(),
    }
    if modality is not None:
        mod = modality.reshape(-1).cpu().numpy()
        top1 = selected[:, 0].cpu().numpy()
        out["mutual_information"] = mutual_information(mod, top1)
        out["modality_entropy"] = entropy_bits(mod)
    return out


def summarize(layers: list[dict]) -> dict:
    """The layers' mean of the scalar metrics (the per-layer lists stay in `layers`)."""
    keys = [k for k, v in layers[0].items() if isinstance(v, float)]
    return {k: float(np.mean([m[k] for m in layers])) for k in keys}
