"""PNG figures (matplotlib, no display): per-expert histograms of routing probabilities, and the
per-expert load and confidence of every MoE layer."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def routing_histograms(probs: list[np.ndarray], layers: list[dict]) -> bytes:
    """One row per MoE layer: a histogram of p_k per expert (left), and load / confidence (right)."""
    rows = len(probs)
    fig, axes = plt.subplots(rows, 2, figsize=(9, 2.8 * rows), squeeze=False)
    for i, (p, m) in enumerate(zip(probs, layers, strict=True)):
        left, right = axes[i]
        bins = np.linspace(0, 1, 26)
        for k in range(p.shape[1]):
            left.hist(p[:, k], bins=bins, histtype="step", label=f"expert {k}")
        left.set(xlabel="routing probability", ylabel="tokens", title=f"layer {i}", yscale="log")
        left.legend(fontsize=6)
        x = np.arange(p.shape[1])
        right.bar(x - 0.2, m["load"], 0.4, label="load (share of slots)")
        right.bar(x + 0.2, m["expert_confidence"], 0.4, label="confidence (top-1 tokens)")
        right.set(xlabel="expert", xticks=x, ylim=(0, 1), title=f"max/mean load {m['max_mean_load']:.2f}")
        right.legend(fontsize=6)
    return _png(fig)
