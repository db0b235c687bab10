"""The pipeline as a picture: one box per step in layers (a step sits one layer after its deepest
dependency), arrows for dependencies, each box coloured by its job's state; stored as the job's
`dag.png` artifact each time a step changes state."""
from __future__ import annotations

import io

from paperworks.services.pipeline.dag import Dag

COLOURS = {
    "PENDING": "#e5e7eb", "QUEUED": "#bfdbfe", "RUNNING": "#fde68a", "SUCCEEDED": "#86efac",
    "FAILED": "#fca5a5", "CANCELLED": "#d1d5db",
}


def render(dag: Dag, states: dict[str, str], title: str = "") -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.patches import FancyBboxPatch, Patch

    depth = dag.depth()
    layers: dict[int, list[str]] = {}
    for name in dag.order():
        layers.setdefault(depth[name], []).append(name)
    width = max(len(v) for v in layers.values())
    pos = {name: (d * 3.2, (len(names) - 1) / 2 - i * 1.4)
           for d, names in layers.items() for i, name in enumerate(names)}
    fig, ax = plt.subplots(figsize=(max(4.0, 3.0 * len(layers)), max(2.4, 1.3 * width + 1.0)), dpi=110)
    by_name = dag.by_name
    for name, (x, y) in pos.items():
        for need in by_name[name].needs:
            nx, ny = pos[need]
            ax.annotate("", xy=(x - 1.2, y), xytext=(nx + 1.2, ny),
                        arrowprops={"arrowstyle": "->", "color": "#374151", "lw": 1.2})
        state = states.get(name, "PENDING")
        ax.add_patch(FancyBboxPatch((x - 1.2, y - 0.45), 2.4, 0.9, boxstyle="round,pad=0.05",
                                    fc=COLOURS.get(state, "#ffffff"), ec="#374151"))
        node = by_name[name]
        ax.text(x, y + 0.15, name, ha="center", va="center", fontsize=9, weight="bold")
        ax.text(x, y - 0.2, f"{node.service}.{node.kind}\n{state.lower()}", ha="center", va="center",
                fontsize=7)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 1.5, max(xs) + 1.5)
    ax.set_ylim(min(ys) - 0.9, max(ys) + 0.9)
    ax.axis("off")
    ax.legend(handles=[Patch(fc=c, ec="#374151", label=s.lower()) for s, c in COLOURS.items()],
              loc="lower center", bbox_to_anchor=(0.5, -0.18), ncol=6, fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
