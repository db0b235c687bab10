"""The timeline picture of a 1F1B schedule (stages x time; forward, backward, idle), PNG via
matplotlib without a display."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLORS = {"F": "#4c9be8", "B": "#f2a541"}


def timeline_png(timeline, title: str, unit: str = "ms", scale: float = 1e3) -> bytes:
    """`timeline[stage] = [(op, microbatch, start, end), ...]`; the gaps are idle time."""
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(timeline) + 1.4))
    for s, ops in enumerate(timeline):
        for op, m, start, end in ops:
            ax.barh(s, (end - start) * scale, left=start * scale, color=COLORS[op], edgecolor="k", lw=0.4)
            if (end - start) * scale > 0:
                ax.text((start + end) / 2 * scale, s, str(m), ha="center", va="center", fontsize=6)
    ax.set_yticks(range(len(timeline)), [f"stage {s}" for s in range(len(timeline))])
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(title, fontsize=9)
    ax.legend(
        handles=[Patch(color=c, label="forward" if k == "F" else "backward") for k, c in COLORS.items()]
        + [Patch(color="white", label="idle (gaps)")],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
