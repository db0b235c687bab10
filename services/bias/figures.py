"""PNG charts of the service's reports (matplotlib, headless)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def bias_chart(report: dict, title: str) -> bytes:
    """Mean bias and refusal rates per attribute × framing."""
    groups: dict[str, dict] = {}
    for key, metrics in report["by_attribute_framing_domain"].items():
        attribute, framing, _ = (p.strip() for p in key.split("|"))
        groups.setdefault(f"{attribute}\n{framing}", []).append(metrics)
    names = sorted(groups)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))

    def pooled(metrics: list[dict], field: str) -> float:
        weighted = [(m[field], m["judged"]) for m in metrics if m[field] is not None and m["judged"]]
        total = sum(w for _, w in weighted)
        return sum(v * w for v, w in weighted) / total if total else 0.0

    left.bar(names, [pooled(groups[n], "mean_bias") for n in names], color="#b5523b")
    left.set_ylim(1, 5)
    left.set_ylabel("mean bias (1-5)")
    left.set_title(f"{title}: bias")
    x = range(len(names))
    right.bar([i - 0.2 for i in x], [pooled(groups[n], "refusal_rate") for n in names], 0.4, label="refusal")
    right.bar(
        [i + 0.2 for i in x],
        [pooled(groups[n], "asymmetric_refusal_rate") for n in names],
        0.4,
        label="asymmetric refusal",
    )
    right.set_xticks(list(x), names)
    right.set_ylim(0, 1)
    right.set_title("refusals")
    right.legend()
    return _png(fig)


def search_chart(generations: list[dict], title: str) -> bytes:
    """Best and mean population fitness per generation, against target calls spent."""
    fig, ax = plt.subplots(figsize=(6, 4))
    calls = [g["calls_used"] for g in generations]
    ax.plot(calls, [g["best_fitness"] for g in generations], marker="o", label="best fitness")
    ax.plot(calls, [g["mean_fitness"] for g in generations], marker=".", label="mean population fitness")
    ax.set_xlabel("target calls")
    ax.set_ylabel("fitness (bias, gated on relevance)")
    ax.set_ylim(0, 5.2)
    ax.set_title(title)
    ax.legend()
    return _png(fig)


def mcq_chart(protocols: dict[str, dict], title: str) -> bytes:
    """Accuracy per permutation for each protocol, and where their selections fell."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, metrics in protocols.items():
        acc = metrics["accuracy_per_permutation"]
        left.plot(range(len(acc)), acc, marker="o", label=f"{name} (std {metrics['std_accuracy']:.3f})")
    left.set_xlabel("permutation")
    left.set_ylabel("accuracy")
    left.set_ylim(0, 1)
    left.set_title(title)
    left.legend()
    width = 0.8 / max(len(protocols), 1)
    for k, (name, metrics) in enumerate(protocols.items()):
        counts = metrics["by_position"]
        total = sum(counts) or 1
        right.bar([i + k * width for i in range(len(counts))], [c / total for c in counts], width, label=name)
    right.set_xlabel("selected display position")
    right.set_ylabel("share of selections")
    right.set_title("selections by position")
    right.legend()
    return _png(fig)
