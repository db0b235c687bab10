"""SDR's evaluation: test curves and accept-decision AUROCs against baselines on the same traces.

The decision module (`decider`) is fitted on the training traces; lambda is calibrated on
validation traces; curves are measured on test traces, whose lookup keys the router never saw.
Baselines, on the same traces:
- always-local and always-best (the remote with the best training quality),
- a confidence-threshold cascade: accept the local answer when exp(-mean NLL) >= tau, else call
  one fixed remote (tau swept, every remote tried; the union of their points),
- a query-embedding router: the same decision module on MiniLM embeddings of the prompt only.

The accept-decision comparison of feature sets (hidden states only vs MiniLM query) tunes each
alike on validation traces: the same module class, and the same grid of components kept per block
(each hidden-state block; MiniLM's 384-d embedding is one block; None keeps every standardised
column, the query router's old setting) x weight decay, picked by validation accept AUROC. A fixed
4 components for one side and none for the other was a comparison of settings, not of features.
The query router's curve uses the MiniLM module chosen so.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from paperworks.services.router.sdr.curves import normalized_area
from paperworks.services.router.sdr.decider import (
    DeciderConfig,
    OperatingPoint,
    QualityHeads,
    SDRFit,
    evaluate_choice,
    fit_decider,
    sweep,
)
from paperworks.services.router.sdr.traces import Traces

# (components per block or None, weight decay) candidates of the accept-decision comparison.
SELECTION_GRID: tuple[tuple[int | None, float], ...] = tuple(itertools.product((2, 4, 8, None), (0.1, 3.0)))


def auroc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    """Area under the ROC curve (rank form, ties averaged); None when only one class is present."""
    labels = labels.astype(bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@dataclass
class Curve:
    name: str
    points: list[OperatingPoint]
    area: float

    def to_dict(self) -> dict:
        return {"name": self.name, "area": self.area, "points": [p.to_dict() for p in self.points]}


def fit_selected(
    train: tuple[np.ndarray, np.ndarray],
    validation: tuple[np.ndarray, np.ndarray],
    config: DeciderConfig,
    blocks: Sequence[tuple[int, int]],
    device: str = "cpu",
) -> tuple[QualityHeads, dict]:
    """The decision module over (features, qualities) whose SELECTION_GRID setting has the best
    validation accept AUROC (first candidate on ties or when validation has one class)."""
    best: tuple[float, QualityHeads, dict] | None = None
    for components, weight_decay in SELECTION_GRID:
        candidate = dataclasses.replace(config, components=components or 1, weight_decay=weight_decay)
        module = fit_decider(train[0], train[1], candidate, blocks if components else (), device)
        score = auroc(validation[1][:, 0], module.predict(validation[0])[:, 0])
        if best is None or (score is not None and score > best[0]):
            setting = {"components": components, "weight_decay": weight_decay, "validation_auroc": score}
            best = (-np.inf if score is None else score, module, setting)
    assert best is not None
    return best[1], best[2]


def evaluate(
    fit: SDRFit,
    train: Traces,
    validation: Traces,
    test: Traces,
    costs: np.ndarray,
    config: DeciderConfig,
    query_features: Callable[[list[str]], np.ndarray] | None = None,
    device: str = "cpu",
) -> dict:
    """Test curves, normalised areas and accept-decision AUROCs of SDR and the baselines (the
    baselines' decision modules trained on `device`, as SDR's was)."""
    best = 1 + int(np.argmax(train.qualities[:, 1:].mean(axis=0)))
    c_max = float(costs[best])
    q_local = float(test.qualities[:, 0].mean())

    def curve(name: str, points: list[OperatingPoint]) -> Curve:
        return Curve(name, points, normalized_area([(p.cost, p.quality) for p in points], q_local, c_max))

    predicted = fit.module.predict(test.local.features)
    curves = [
        curve("sdr", sweep(predicted, test.qualities, costs, fit.lambdas)),
        curve("always_local", [evaluate_choice(np.zeros(len(test), int), test.qualities, costs)]),
        curve("always_best", [evaluate_choice(np.full(len(test), best), test.qualities, costs)]),
        curve("confidence_cascade", cascade_points(train, test, costs)),
    ]
    accepted_correct = test.qualities[:, 0]
    accept_auroc = {
        "sdr": auroc(accepted_correct, predicted[:, 0]),
        "confidence": auroc(accepted_correct, test.local.confidence),
    }
    hidden = train.local.layout.hidden_slice()
    selection: dict[str, dict] = {}
    hidden_only, selection["hidden_states_only"] = fit_selected(
        (train.local.features[:, hidden], train.qualities),
        (validation.local.features[:, hidden], validation.qualities),
        config,
        train.local.layout.blocks(),
        device,
    )
    accept_auroc["hidden_states_only"] = auroc(
        accepted_correct, hidden_only.predict(test.local.features[:, hidden])[:, 0]
    )
    if query_features is not None:
        train_q, test_q = query_features(train.prompts), query_features(test.prompts)
        query, selection["query_embedding"] = fit_selected(
            (train_q, train.qualities),
            (query_features(validation.prompts), validation.qualities),
            config,
            [(0, train_q.shape[1])],
            device,
        )
        query_pred = query.predict(test_q)
        curves.append(curve("query_router", sweep(query_pred, test.qualities, costs, fit.lambdas)))
        accept_auroc["query_embedding"] = auroc(accepted_correct, query_pred[:, 0])
    return {
        "c_max": c_max,
        "best_remote": best,
        "local_quality": q_local,
        "best_quality": float(test.qualities[:, best].mean()),
        "areas": {c.name: c.area for c in curves},
        "accept_auroc": accept_auroc,
        "accept_selection": selection,
        "curves": [c.to_dict() for c in curves],
    }


def cascade_points(
    train: Traces, test: Traces, costs: np.ndarray, n_thresholds: int = 41
) -> list[OperatingPoint]:
    thresholds = np.quantile(train.local.confidence, np.linspace(0, 1, n_thresholds))
    points = []
    for remote in range(1, len(costs)):
        for tau in thresholds:
            choice = np.where(test.local.confidence >= tau, 0, remote)
            points.append(evaluate_choice(choice, test.qualities, costs, float(tau)))
    return points
