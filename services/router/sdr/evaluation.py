"""Selective Deferred Routing end to end: traces, the decision module, and its evaluation.

Traces (SDR, ICML 2026, training data): for each generated checkable task the local LM answers
(greedy) and yields its features (`local_lm`); every remote's quality on the task is observed
(simulated from known accuracy, or a real remote's answer checked). Options are 0 = accept the
local answer (cost 0) and 1..m = the remotes (their prices). The decision module (`decider`) is
fitted on the training traces; lambda is calibrated on validation traces; curves are measured on
test traces, whose lookup keys the router never saw. Baselines, on the same traces:
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
from paperworks.services.router.checkable import TaskSuite
from paperworks.services.router.curves import normalized_area
from paperworks.services.router.decider import (
    DeciderConfig,
    OperatingPoint,
    QualityHeads,
    evaluate_choice,
    fit_decider,
    lambda_grid,
    sweep,
)
from paperworks.services.router.local_lm import LocalAnswers, answer_and_features
from paperworks.services.router.remotes import RemoteAgent, remote_quality, simulated_quality
from paperworks.shared.backends.base import ModelBackend

SPLITS = ("train", "validation", "test")
# Which entries of the local model's hidden-state stack feed the decider (negative: from the end;
# -1 is the final, normed layer). Recorded in the policy so Route reads the same ones.
HIDDEN_LAYERS: tuple[int, ...] = (-1,)
# (components per block or None, weight decay) candidates of the accept-decision comparison.
SELECTION_GRID: tuple[tuple[int | None, float], ...] = tuple(itertools.product((2, 4, 8, None), (0.1, 3.0)))


@dataclass
class Traces:
    prompts: list[str]
    families: np.ndarray
    local: LocalAnswers
    qualities: np.ndarray  # [N, 1 + m]: local, then each remote

    def __len__(self) -> int:
        return len(self.prompts)


def collect_traces(
    backend: ModelBackend,
    suite: TaskSuite,
    remotes: list[RemoteAgent],
    n: int,
    *,
    seed: int,
    part: int,
    max_new_tokens: int = 8,
    layers: Sequence[int] = HIDDEN_LAYERS,
) -> Traces:
    """Traces for one split (`part` 0/1/2 also selects that split's lookup keys)."""
    tasks = suite.generate(n, seed=1000 * seed + part, part=part)
    local = answer_and_features(
        backend, [t.prompt for t in tasks], max_new_tokens=max_new_tokens, layers=layers
    )
    families = np.array([suite.family_of(t) for t in tasks])
    columns = [np.array([float(t.check(a)) for t, a in zip(tasks, local.texts, strict=True)])]
    for i, remote in enumerate(remotes):
        if remote.simulated:
            columns.append(simulated_quality(remote, families, 1000 * seed + part, i))
        else:
            columns.append(remote_quality(remote, tasks))
    return Traces([t.prompt for t in tasks], families, local, np.stack(columns, axis=1))


def option_costs(remotes: list[RemoteAgent]) -> np.ndarray:
    return np.array([0.0] + [r.price for r in remotes])


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


@dataclass
class SDRFit:
    module: QualityHeads
    lambdas: np.ndarray
    validation_curve: list[OperatingPoint]
    default_lambda: float


def fit_sdr(train: Traces, validation: Traces, costs: np.ndarray, config: DeciderConfig) -> SDRFit:
    module = fit_decider(train.local.features, train.qualities, config, train.local.layout.blocks())
    lambdas = lambda_grid(costs)
    val_points = sweep(module.predict(validation.local.features), validation.qualities, costs, lambdas)
    # Default preference: the knee, the point with the best quality - cost / c_max trade-off.
    c_max = costs.max()
    knee = max(val_points, key=lambda p: p.quality - p.cost / c_max)
    return SDRFit(module, lambdas, val_points, knee.lam)


def fit_selected(
    train: tuple[np.ndarray, np.ndarray],
    validation: tuple[np.ndarray, np.ndarray],
    config: DeciderConfig,
    blocks: Sequence[tuple[int, int]],
) -> tuple[QualityHeads, dict]:
    """The decision module over (features, qualities) whose SELECTION_GRID setting has the best
    validation accept AUROC (first candidate on ties or when validation has one class)."""
    best: tuple[float, QualityHeads, dict] | None = None
    for components, weight_decay in SELECTION_GRID:
        candidate = dataclasses.replace(config, components=components or 1, weight_decay=weight_decay)
        module = fit_decider(train[0], train[1], candidate, blocks if components else ())
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
) -> dict:
    """Test curves, normalised areas and accept-decision AUROCs of SDR and the baselines."""
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
