"""PNG maps (matplotlib, no display): an embedding's first three principal components as colours
over each region, and a task's truth beside its predictions."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

MAX_PANELS = 6


def principal_components(x: np.ndarray, k: int = 3) -> np.ndarray:
    centered = x - x.mean(0)
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    return centered @ vt[:k].T


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def embedding_map(lat: np.ndarray, lon: np.ndarray, region: np.ndarray, embedding: np.ndarray) -> bytes:
    """One panel per region (up to six): each location coloured by PCs 1-3 of the embedding as RGB."""
    pcs = principal_components(embedding.astype(np.float64), 3)
    lo, hi = np.percentile(pcs, 2, axis=0), np.percentile(pcs, 98, axis=0)
    rgb = np.clip((pcs - lo) / np.maximum(hi - lo, 1e-9), 0, 1)
    if rgb.shape[1] < 3:
        rgb = np.pad(rgb, ((0, 0), (0, 3 - rgb.shape[1])), constant_values=0.5)
    regions = sorted(set(region.tolist()))[:MAX_PANELS]
    fig, axes = plt.subplots(1, len(regions), figsize=(3.2 * len(regions), 3.2), squeeze=False)
    for ax, name in zip(axes[0], regions, strict=True):
        inside = region == name
        ax.scatter(lon[inside], lat[inside], c=rgb[inside], s=6)
        ax.set_title(name, fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    fig.suptitle("embedding principal components 1-3 as RGB", fontsize=10, y=1.04)
    return _png(fig)


def prediction_map(lat: np.ndarray, lon: np.ndarray, truth: np.ndarray, prediction: np.ndarray,
                   title: str, categorical: bool) -> bytes:
    """Truth and prediction side by side over one region (same colour scale)."""
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.4))
    cmap = "tab10" if categorical else "viridis"
    both = np.concatenate([truth, prediction]).astype(np.float64)
    vmin, vmax = (np.nanmin(both), np.nanmax(both)) if categorical else np.nanpercentile(both, (2, 98))
    for ax, values, name in zip(axes, (truth, prediction), ("truth", "prediction"), strict=True):
        ax.scatter(lon, lat, c=values, s=8, cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set_title(name, fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    return _png(fig)
