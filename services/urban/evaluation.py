"""The downstream evaluation protocol (UrbanFusion, arXiv 2510.13774, §4 and App. C in miniature).

For each task a probe maps frozen embeddings to the target and is scored on held-out
locations: R² for regression, macro F1 for classification. Reported per task:
- the embedding from every available modality, with and without raw coordinates
  (lat, lon) appended to the probe's input, beside the concatenated-features baseline;
- per modality subset S: embeddings computed from S alone (locations carrying none of S
  are left out), each with its own probe;
- leave-one-region-out: a probe fitted on all other regions scores each region, from the embedding
  (which carries coordinates through its coordinates token) beside the concatenated features
  with and without raw coordinates (the fair comparison gives both sides coordinates).
Random splits are seeded; everything here is deterministic given the seed. The probes fit on
`device` (the encoder embeds on its own).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from paperworks.services.urban.baselines import concatenated_features
from paperworks.services.urban.probes import ProbeKind, TaskType, fit_and_score
from paperworks.services.urban.urbanfusion.encoder import FeatureSet, UrbanEncoder
from paperworks.services.urban.urbanfusion.errors import FieldError

MIN_LABELED = 10


@dataclass
class Target:
    name: str
    task_type: TaskType
    y: np.ndarray  # floats, or class indices into `classes`
    labeled: np.ndarray  # (N,) bool
    classes: list[str]

    @property
    def metric(self) -> str:
        return "r2" if self.task_type == "regression" else "macro_f1"


def infer_task_type(column: pd.Series) -> TaskType:
    numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    return "regression" if numeric and column.nunique(dropna=True) > 20 else "classification"


def make_target(name: str, targets: pd.DataFrame, task_type: str, field: str,
                classes: list[str] | None = None) -> Target:
    """A target column as probe labels; `classes` fixes the class order (unknown labels -> -1).
    A problem is a FieldError naming `field`."""
    if name not in targets.columns:
        known = ", ".join(map(str, targets.columns)) or "none"
        raise FieldError(field, f"dataset has no target {name!r} (targets: {known})")
    column = targets[name]
    task = task_type or infer_task_type(column)
    if task == "regression":
        values = pd.to_numeric(column, errors="coerce").to_numpy(np.float64)
        labeled = np.isfinite(values)
        y, classes = np.where(labeled, values, 0.0), []
    else:
        labeled = column.notna().to_numpy()
        text = column.astype(str).to_numpy()
        classes = classes or sorted(set(text[labeled].tolist()))
        if len(classes) < 2:
            raise FieldError(field, f"target {name!r} needs at least two classes")
        index = {c: i for i, c in enumerate(classes)}
        y = np.array([index.get(v, -1) for v in text], np.int64)
    if labeled.sum() < MIN_LABELED:
        raise FieldError(field, f"target {name!r} has {int(labeled.sum())} labeled locations; "
                                f"at least {MIN_LABELED} needed")
    return Target(name, task, y, labeled, classes)


def raw_coordinates(fs: FeatureSet) -> np.ndarray:
    return np.stack([fs.lat, fs.lon], axis=1).astype(np.float32)


def random_split(rows: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(rows)
    k = max(1, int(round(test_fraction * len(rows))))
    return np.sort(order[k:]), np.sort(order[:k])


def subset_name(names: tuple[str, ...], subset) -> str:
    return "+".join(n for n in names if n in subset)


def all_subsets(names: tuple[str, ...]) -> list[frozenset[str]]:
    return [frozenset(c) for k in range(1, len(names) + 1) for c in itertools.combinations(names, k)]


def default_subsets(names: tuple[str, ...]) -> list[frozenset[str]]:
    if len(names) <= 5:
        return all_subsets(names)
    return [frozenset([n]) for n in names] + [frozenset(names)]


def score(x: np.ndarray, target: Target, train: np.ndarray, test: np.ndarray, kind: ProbeKind,
          seed: int, device: str = "cpu") -> float:
    return fit_and_score(x[train], target.y[train], x[test], target.y[test], target.task_type, kind,
                         target.classes, seed, device)


def subset_scores(encoder: UrbanEncoder, fs: FeatureSet, target: Target, subsets: list[frozenset[str]],
                  train: np.ndarray, test: np.ndarray, kind: ProbeKind, seed: int,
                  device: str = "cpu") -> dict[str, float]:
    """Per subset: embeddings from that subset only, a probe on the train rows that carry any of it."""
    out = {}
    for subset in subsets:
        view = fs.restricted(subset)
        usable = view.present.any(axis=1)
        tr, te = train[usable[train]], test[usable[test]]
        if len(tr) < MIN_LABELED or len(te) < 2:
            continue
        emb = np.zeros((len(fs), encoder.dim), np.float32)
        emb[usable] = encoder.embed(view.take(usable))
        out[subset_name(fs.names, subset)] = score(emb, target, tr, te, kind, seed, device)
    return out


def evaluate(encoder: UrbanEncoder, fs: FeatureSet, targets: list[Target], kind: ProbeKind,
             subsets: list[frozenset[str]], leave_one_region_out: bool, test_fraction: float, seed: int,
             on_task: Callable[[int, int, str], None] | None = None, device: str = "cpu") -> dict:
    embedding = encoder.embed(fs)
    concat = concatenated_features(fs)
    xy = raw_coordinates(fs)
    inputs = {"embedding": embedding, "embedding+coordinates": np.hstack([embedding, xy]),
              "concatenated": concat, "concatenated+coordinates": np.hstack([concat, xy])}
    report = {}
    for i, target in enumerate(targets, start=1):
        rows = np.flatnonzero(target.labeled)
        train, test = random_split(rows, test_fraction, seed)
        entry = {"task_type": target.task_type, "metric": target.metric,
                 "labeled": int(len(rows)), "test": int(len(test))}
        entry |= {name: score(x, target, train, test, kind, seed, device) for name, x in inputs.items()}
        entry["subsets"] = subset_scores(encoder, fs, target, subsets, train, test, kind, seed, device)
        if leave_one_region_out:
            held = {}
            for region in sorted(set(fs.region[rows].tolist())):
                inside = fs.region[rows] == region
                if inside.all():
                    continue
                tr, te = rows[~inside], rows[inside]
                held[region] = {name: score(inputs[name], target, tr, te, kind, seed, device)
                                for name in ("embedding", "concatenated", "concatenated+coordinates")}
            entry["leave_one_region_out"] = held
        report[target.name] = entry
        if on_task is not None:
            on_task(i, len(targets), target.name)
    return report
