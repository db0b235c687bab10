"""Protocol metrics computed from known selections: per-permutation accuracy and its spread,
histograms, demo-majority agreement."""

from __future__ import annotations

import pytest
from paperworks.services.bias.mcq.evaluate import (
    MCQSettings,
    Selection,
    choose_demos,
    protocol_metrics,
    variance_ratio,
)
from paperworks.services.bias.mcq.match import Match
from paperworks.services.bias.mcq.nonsenseqa import MCQItem

ITEMS = [MCQItem(f"q{k}", ("a", "b", "c", "d"), k % 4, f"q{k}") for k in range(4)]
ORDERS = [(0, 1, 2, 3), (1, 2, 3, 0)]


def always_first(order):
    """A model that always picks display position 0."""
    return [Selection(item.permuted(order), order, "A", Match(0, "letter")) for item in ITEMS]


def test_accuracy_per_permutation_and_its_variance():
    metrics = protocol_metrics("standard", [always_first(o) for o in ORDERS], [[] for _ in ITEMS])
    # identity: only q0's gold is at A; rotated: the item whose gold is original option 1
    assert metrics["accuracy_per_permutation"] == [0.25, 0.25]
    assert metrics["variance"] == 0.0 and metrics["by_position"] == [8, 0, 0, 0]
    assert metrics["by_label"] == {"A": 8, "B": 0, "C": 0, "D": 0}
    assert metrics["by_original_option"] == [4, 4, 0, 0]
    assert metrics["demo_majority_agreement"] is None


def test_demo_majority_agreement_counts_answers_at_the_demos_label():
    demos = [[ITEMS[0].with_answer_at(0)] * 2 for _ in ITEMS]
    metrics = protocol_metrics("md", [always_first(ORDERS[0])], demos)
    assert metrics["demo_majority_agreement"] == 1.0 and metrics["chance"] == 0.25
    assert metrics["by_label"] == {"-": 4}


def test_attack_demos_all_carry_the_attack_label():
    pool = [MCQItem(f"d{k}", ("w", "x", "y", "z"), k % 4, f"d{k}") for k in range(8)]
    demos = choose_demos(ITEMS, pool, MCQSettings(shots=3, attack_label=2, seed=1))
    assert all(len(d) == 3 and all(x.answer == 2 for x in d) for d in demos)
    assert choose_demos(ITEMS, pool, MCQSettings(shots=3, seed=1)) == choose_demos(
        ITEMS, pool, MCQSettings(shots=3, seed=1)
    )


def test_variance_ratio_is_undefined_when_md_does_not_vary():
    assert variance_ratio({"variance": 0.2}, {"variance": 0.05}) == pytest.approx(4.0)
    assert variance_ratio({"variance": 0.2}, {"variance": 0.0}) is None
