"""The MCQ job as a plain function: protocols × permutations over one dataset, one report.

The report holds, per protocol, accuracy per permutation with its mean, standard deviation and
variance, selection histograms and (under an attack) demo-majority agreement; across protocols
the variance ratio standard / M&D and the drop in mean accuracy (standard − M&D), the two
figures ABCD (arXiv 2602.17445) reports. `standard_scoring` in the report is how the standard
protocol's answers were read; where label log-probabilities were asked for but the model cannot
give them (a chat endpoint, a server that does not echo prompt logprobs), the answers were
generated and the letter parsed, and `standard_scoring_fallback` says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from paperworks.services.bias.embedder import SentenceEmbedder
from paperworks.services.bias.mcq.evaluate import (
    MCQSettings,
    Selection,
    choose_demos,
    label_scoring_unavailable,
    protocol_metrics,
    run_permutation,
    variance_ratio,
)
from paperworks.services.bias.mcq.nonsenseqa import MCQItem
from paperworks.services.bias.mcq.render import permutations
from paperworks.shared.backends import ModelBackend, Unsupported


def same_option_count(items: Sequence[MCQItem]) -> tuple[int, list[MCQItem], list[MCQItem]]:
    """(n, items with n options, the others): permutations need one option count per run, the
    most common one."""
    n = Counter(len(i.options) for i in items).most_common(1)[0][0]
    return n, [i for i in items if len(i.options) == n], [i for i in items if len(i.options) != n]


def evaluate_mcq(
    model: ModelBackend,
    items: Sequence[MCQItem],
    demo_pool: Sequence[MCQItem],
    protocols: Sequence[str],
    settings: MCQSettings,
    *,
    max_permutations: int,
    embedder: Callable[[], SentenceEmbedder],
    on_permutation: Callable[[int, int, str], None] | None = None,
) -> tuple[dict, list[dict]]:
    """(report, response rows); `on_permutation(done, total, protocol)` after each one."""
    n_options = len(items[0].options)
    orders = permutations(n_options, max_permutations, settings.seed)
    demos = choose_demos(items, [d for d in demo_pool if len(d.options) == n_options], settings)
    total, done = len(protocols) * len(orders), 0
    metrics: dict[str, dict] = {}
    rows: list[dict] = []
    requested, fallback = settings.standard_scoring, None
    if "standard" in protocols and requested == "logprob":
        fallback = label_scoring_unavailable(model)
        if fallback is not None:
            settings = replace(settings, standard_scoring="generate")
    for protocol in protocols:
        per_permutation: list[list[Selection]] = []
        for k, order in enumerate(orders):
            try:
                selections = run_permutation(model, protocol, items, demos, order, settings, embedder)
            except Unsupported as exc:
                if protocol != "standard" or settings.standard_scoring != "logprob" or k > 0:
                    raise
                fallback = f"the endpoint cannot score label log-probabilities ({exc.message})"
                settings = replace(settings, standard_scoring="generate")
                selections = run_permutation(model, protocol, items, demos, order, settings, embedder)
            per_permutation.append(selections)
            rows += [
                {
                    "protocol": protocol,
                    "permutation": k,
                    "order": list(order),
                    "id": s.item.id,
                    "response": s.response,
                    "chosen": s.match.index,
                    "answer": s.item.answer,
                    "correct": s.correct,
                    **{f"match_{key}": v for key, v in s.match.row().items() if key != "index"},
                }
                for s in selections
            ]
            done += 1
            if on_permutation:
                on_permutation(done, total, protocol)
        metrics[protocol] = protocol_metrics(protocol, per_permutation, demos)
    report = {
        "questions": len(items),
        "options": n_options,
        "permutations": [list(o) for o in orders],
        "shots": settings.shots,
        "attack_label": None if settings.attack_label is None else chr(ord("A") + settings.attack_label),
        "standard_scoring": settings.standard_scoring if "standard" in protocols else None,
        "standard_scoring_requested": requested if "standard" in protocols else None,
        "standard_scoring_fallback": fallback,
        "protocols": metrics,
    }
    if "standard" in metrics and "md" in metrics:
        report["variance_ratio"] = variance_ratio(metrics["standard"], metrics["md"])
        report["mean_accuracy_drop"] = metrics["standard"]["mean_accuracy"] - metrics["md"]["mean_accuracy"]
    return report, rows
