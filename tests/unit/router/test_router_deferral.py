"""The two-stage surrogate, MILD's margins and the deferral metrics, on hand-checkable inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.services.router.mild.deferral import (
    agent_costs,
    best_frequencies,
    deferral_surrogate,
    expert_margins,
    surrogate_weights,
)
from paperworks.services.router.mild.metrics import (
    balanced_deferral_loss,
    coverage,
    deferral_loss,
    deferral_report,
    recalls,
    system_accuracy,
)


def test_costs_add_consultation_costs_to_weighted_errors():
    errors = np.array([[1.0, 0.0, 0.5]])
    costs = agent_costs(errors, np.array([1.0, 2.0, 1.0]), np.array([0.0, 0.1, 0.3]))
    np.testing.assert_allclose(costs, [[1.0, 0.1, 0.8]])


def test_weights_are_the_sum_of_the_other_agents_costs():
    costs = torch.tensor([[1.0, 0.1, 0.8]])
    np.testing.assert_allclose(surrogate_weights(costs).numpy(), [[0.9, 1.8, 1.1]], rtol=1e-6)


def test_surrogate_without_margins_is_the_weighted_cross_entropy():
    torch.manual_seed(0)
    scores, costs = torch.randn(5, 3), torch.rand(5, 3)
    expected = (
        sum(
            surrogate_weights(costs)[i, j] * -torch.log_softmax(scores[i], 0)[j]
            for i in range(5)
            for j in range(3)
        )
        / 5
    )
    torch.testing.assert_close(deferral_surrogate(scores, costs), expected)
    torch.testing.assert_close(deferral_surrogate(scores, costs, torch.zeros(3)), expected)


def test_margin_term_lowers_the_label_score_inside_the_softmax():
    scores = torch.tensor([[0.3, -0.2, 1.0]])
    costs = torch.tensor([[0.0, 1.0, 1.0]])  # weights w = [2, 1, 1]
    margins = torch.tensor([0.5, 0.0, 0.0])
    weights = surrogate_weights(costs)[0]
    expected = 0.0
    for j in range(3):
        shifted = scores[0].clone()
        shifted[j] -= margins[j]
        expected += weights[j] * -torch.log_softmax(shifted, 0)[j]
    torch.testing.assert_close(deferral_surrogate(scores, costs, margins), expected)


def test_margins_grow_as_an_expert_is_rarely_best_and_vanish_at_zero_scale():
    costs = np.array([[0.0, 1, 1]] * 90 + [[1, 0.0, 1]] * 9 + [[1, 1, 0.0]] * 1)
    freq = best_frequencies(costs)
    np.testing.assert_allclose(freq, [0.9, 0.09, 0.01])
    margins = expert_margins(freq, 2.0, gamma=0.5)
    assert margins[2] == pytest.approx(2.0) and margins[0] < margins[1] < margins[2]
    np.testing.assert_allclose(expert_margins(freq, 0.0), 0.0)


def test_metrics_on_a_hand_example():
    costs = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.1]])  # best: 0, 0, 0, 1
    errors = np.array([[0, 1], [0, 1], [0, 1], [1, 0]], dtype=float)
    choice = np.array([0, 0, 0, 0])  # never defers
    assert deferral_loss(choice, costs) == pytest.approx(0.25)
    assert balanced_deferral_loss(choice, costs) == pytest.approx((0.0 + 1.0) / 2)
    assert recalls(choice, costs) == [1.0, 0.0]
    assert coverage(choice) == 1.0 and system_accuracy(choice, errors) == pytest.approx(0.75)
    report = deferral_report(np.array([0, 0, 0, 1]), costs, errors)
    assert report["balanced_deferral_loss"] == pytest.approx(0.05)
    assert report["deferral_ratio"] == [0.75, 0.25] and report["recall"] == [1.0, 1.0]
