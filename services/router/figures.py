"""The PNG half of each evaluation report (the data half is report.json): matplotlib, Agg."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from paperworks.services.router.sdr.curves import upper_hull  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def rejector_png(report: dict) -> bytes:
    """Left: coverage vs system accuracy as the base predictor's score is offset. Right:
    per-agent recall of each trained loss."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    agents = report["agents"]
    for name, run in report["runs"].items():
        curve = run["coverage_curve"]
        left.plot(
            [p["coverage"] for p in curve], [p["system_accuracy"] for p in curve], marker=".", label=name
        )
    left.set_xlabel("coverage (kept by the base predictor)")
    left.set_ylabel("system accuracy")
    left.set_title("accuracy-coverage (test)")
    left.legend()
    width = 0.8 / max(1, len(report["runs"]))
    for i, (name, run) in enumerate(report["runs"].items()):
        recall = [r if r is not None else 0.0 for r in run["test"]["recall"]]
        right.bar([j + i * width for j in range(len(agents))], recall, width=width, label=name)
    right.set_xticks(
        [j + width * (len(report["runs"]) - 1) / 2 for j in range(len(agents))], agents, rotation=20
    )
    right.set_ylabel("recall (routed to the agent that is best)")
    right.set_title("per-agent recall (test)")
    right.legend()
    return _png(fig)


def decider_png(report: dict) -> bytes:
    """Cost-quality curves of SDR and its baselines on the test traces: each family's operating
    points (dots) and the hull whose normalised area the report gives (line)."""
    evaluation = report["evaluation"]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for curve in evaluation["curves"]:
        points = [(p["cost"], p["quality"]) for p in curve["points"]]
        hull = upper_hull([(0.0, evaluation["local_quality"]), *points])
        (line,) = ax.plot(*zip(*hull, strict=True), "-", label=f"{curve['name']} (area {curve['area']:.3f})")
        ax.plot(*zip(*points, strict=True), ".", color=line.get_color(), alpha=0.5)
    ax.set_xlabel("mean cost per request")
    ax.set_ylabel("mean quality")
    ax.set_title("Selective Deferred Routing: cost-quality (test)")
    ax.legend(fontsize=8)
    return _png(fig)
