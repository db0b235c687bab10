"""How a deferral decision is scored: the metrics the MILD paper reports.

All take the chosen agent per input, the per-agent costs (consultation costs included) and, for
accuracy, the per-agent errors. Grouping by an input's best agent is what makes a metric
"expert-balanced": the balanced deferral loss is the mean over experts of the mean deferral loss
on the inputs where that expert is the best one, which is the deferral loss one would measure on
a test split resampled so that every expert is the best agent equally often.
"""

from __future__ import annotations

import numpy as np
from paperworks.services.router.mild.deferral import best_agents


def deferral_loss(choice: np.ndarray, costs: np.ndarray) -> float:
    """Mean cost of the agent chosen for each input (consultation costs included)."""
    return float(costs[np.arange(len(choice)), choice].mean())


def balanced_deferral_loss(choice: np.ndarray, costs: np.ndarray) -> float:
    """Mean over the agents that are best somewhere of the deferral loss on their inputs."""
    picked = costs[np.arange(len(choice)), choice]
    best = best_agents(costs)
    return float(np.mean([picked[best == j].mean() for j in np.unique(best)]))


def system_accuracy(choice: np.ndarray, errors: np.ndarray) -> float:
    """Mean 1 - error of the chosen agent (accuracy for 0/1 errors, quality for generation)."""
    return float(1.0 - errors[np.arange(len(choice)), choice].mean())


def coverage(choice: np.ndarray) -> float:
    """Fraction of inputs kept by the base predictor (agent 0), i.e. not deferred."""
    return float((choice == 0).mean())


def deferral_ratios(choice: np.ndarray, n_agents: int) -> list[float]:
    """Fraction of inputs sent to each agent."""
    return (np.bincount(choice, minlength=n_agents) / len(choice)).tolist()


def recalls(choice: np.ndarray, costs: np.ndarray) -> list[float | None]:
    """Per agent: among inputs whose best agent it is, the fraction routed to it (None if none)."""
    best = best_agents(costs)
    out: list[float | None] = []
    for j in range(costs.shape[1]):
        mask = best == j
        out.append(float((choice[mask] == j).mean()) if mask.any() else None)
    return out


def deferral_report(choice: np.ndarray, costs: np.ndarray, errors: np.ndarray) -> dict:
    """Every metric above for one decision, as plain JSON data."""
    return {
        "deferral_loss": deferral_loss(choice, costs),
        "balanced_deferral_loss": balanced_deferral_loss(choice, costs),
        "system_accuracy": system_accuracy(choice, errors),
        "coverage": coverage(choice),
        "deferral_ratio": deferral_ratios(choice, costs.shape[1]),
        "recall": recalls(choice, costs),
    }
