"""PNG figures of an audit (matplotlib, no display): the following curve with its logistic fit and
balance point, and the layer-wise logit-lens trajectories in the ambiguous and clear bands."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def following_curve(laws: dict) -> bytes:
    """P(follow text) per bin of relative uncertainty, one panel per index."""
    fig, axes = plt.subplots(1, len(laws), figsize=(4.2 * len(laws), 3.4), squeeze=False)
    for ax, (name, law) in zip(axes[0], laws.items(), strict=True):
        x = np.asarray(law["curve"]["centers"])
        ax.plot(x, law["curve"]["rates"], "o", label="binned")
        grid = np.linspace(x.min(), x.max(), 200)
        ax.plot(grid, 1 / (1 + np.exp(-(law["a"] - law["b"] * grid))), "-", label="logistic fit")
        ax.axvline(law["balance_point"], color="k", ls="--", lw=1, label=f"x* = {law['balance_point']:.3f}")
        ax.axvspan(*law["ci"], color="grey", alpha=0.2)
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.set(
            xlabel=f"relative uncertainty ({name}): U_text - U_vision", ylabel="P(follow text)", ylim=(0, 1)
        )
        ax.legend(fontsize=7)
    return _png(fig)


def layer_trajectories(
    margins: np.ndarray, ambiguous: np.ndarray, clear: np.ndarray, examples: int = 12
) -> bytes:
    """Logit-lens p(a_T) - p(a_V) per layer: a few ambiguous-band items, and the bands' mean |margin|."""
    layers = np.arange(1, margins.shape[1] + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    for row in margins[ambiguous][:examples]:
        left.plot(layers, row, "-", color="tab:orange", alpha=0.6)
    for row in margins[clear][:examples]:
        left.plot(layers, row, "-", color="tab:blue", alpha=0.4)
    left.axhline(0, color="k", lw=0.5)
    left.set(xlabel="LM layer", ylabel="p(a_T) - p(a_V)", title="ambiguous (orange) vs clear (blue) items")
    for mask, name in ((ambiguous, "ambiguous"), (clear, "clear")):
        if mask.any():
            right.plot(layers, np.abs(margins[mask]).mean(0), "o-", label=name)
    right.set(xlabel="LM layer", ylabel="mean |p(a_T) - p(a_V)|")
    right.legend(fontsize=7)
    return _png(fig)


def spatial_depth(images: np.ndarray, teacher: np.ndarray, predicted: np.ndarray, truth: np.ndarray) -> bytes:
    """SpatioLM: per row one frame: the image, the pseudo-teacher's depth, the head's depth and the
    ground truth (half resolution, one colour scale per row)."""
    n = len(images)
    fig, axes = plt.subplots(n, 4, figsize=(8, 2.1 * n), squeeze=False)
    for r in range(n):
        lo, hi = float(truth[r].min()), float(truth[r].max())
        panels = [
            (images[r], "image"),
            (teacher[r], "teacher depth"),
            (predicted[r], "predicted depth"),
            (truth[r], "ground truth"),
        ]
        for ax, (a, title) in zip(axes[r], panels, strict=True):
            ax.imshow(a, **({} if a.ndim == 3 else {"cmap": "magma_r", "vmin": lo, "vmax": hi}))
            ax.set_title(title, fontsize=8)
            ax.axis("off")
    return _png(fig)
