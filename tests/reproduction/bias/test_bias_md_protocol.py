"""ABCD's claims in miniature (arXiv 2602.17445), on a tiny transformer trained here
that knows the answer to some questions (one option is a fact it learned) and not to others, and
whose lettered MCQ data carries a label shortcut for what it does not know:

- Matched-and-Dashed's accuracy varies across option permutations at least 3x less than the
  standard protocol's, for at most a small drop in mean accuracy;
- on NonsenseQA under the all-"A" few-shot attack the standard protocol follows the demos'
  label far above chance, M&D stays near chance (1/4).

Both protocols run through the service's own `evaluate_mcq` in the same run, on the same model.
The first test also checks the miniature is the paper's setting: the model answers the questions
it knows under *both* protocols (the standard protocol is not reduced to always answering "A").
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from paperworks.services.bias.mcq.audit import evaluate_mcq
from paperworks.services.bias.mcq.evaluate import MCQSettings
from paperworks.services.bias.mcq.nonsenseqa import nonsense_qa
from reproduction.bias.shortcut_model import FactWorld, accuracy_by_kind, evaluation_set, train_shortcut_model

SEED = 0
STEPS = 900


@pytest.fixture(scope="module")
def world():
    return FactWorld(SEED)


@pytest.fixture(scope="module")
def model(world):
    return train_shortcut_model(world, steps=STEPS, seed=SEED)


def run(model, items, pool, embedder, **settings):
    return evaluate_mcq(
        model,
        items,
        pool,
        ["standard", "md"],
        MCQSettings(seed=SEED, **settings),
        max_permutations=24,
        embedder=lambda: embedder,
    )


def test_md_variance_across_permutations_is_at_least_3x_lower(model, world, embedder):
    rng = random.Random(SEED + 1)
    demos = [world.item(rng, True, f"demo-{k}") for k in range(16)]
    items = evaluation_set(world, 24, SEED + 2)
    report, rows = run(model, items, demos, embedder, shots=2)
    standard, md = report["protocols"]["standard"], report["protocols"]["md"]
    by_kind = accuracy_by_kind(rows, world, items)
    assert len(report["permutations"]) == 24  # every permutation of 4 options
    print(
        f"variance across permutations: standard {standard['variance']:.4f} "
        f"(mean {standard['mean_accuracy']:.3f}), M&D {md['variance']:.4f} (mean {md['mean_accuracy']:.3f}); "
        f"accuracy on known / unknown questions: {by_kind}"
    )
    for protocol in ("standard", "md"):  # the model knows what it knows under either protocol
        assert by_kind[protocol]["knowable"] >= 0.7, (protocol, by_kind)
    assert standard["variance"] > 0.01
    assert standard["variance"] >= 3 * md["variance"]
    assert md["mean_accuracy"] >= standard["mean_accuracy"] - 0.1


def test_nonsenseqa_attack_moves_standard_but_not_md(model, world, embedder):
    """Random questions over the model's non-fact words, golds uniform over positions; every demo
    answered at "A"."""
    items = nonsense_qa(24, seed=SEED + 3, question_words=1, vocabulary=world.fillers)
    items = [replace(i, question=i.question.rstrip("?")) for i in items]  # the model's words
    rng = random.Random(SEED + 4)
    demos = [world.item(rng, True, f"demo-{k}") for k in range(16)]
    report, _ = run(model, items, demos, embedder, shots=2, attack_label=0)
    standard, md = report["protocols"]["standard"], report["protocols"]["md"]
    print(
        f"share of answers at the demos' label: standard {standard['demo_majority_agreement']:.3f}, "
        f"M&D {md['demo_majority_agreement']:.3f}, chance {md['chance']:.2f}"
    )
    assert standard["demo_majority_agreement"] >= 0.6
    assert abs(md["demo_majority_agreement"] - md["chance"]) <= 0.15
    assert abs(md["mean_accuracy"] - md["chance"]) <= 0.15  # nonsense: nobody can know the answers
