"""Spatial and general QA items over renderer scenes (SpatioLM reproduction, research note 7b).

Spatial (the VSI-Bench-style split the branch is trained for): which of two objects is closer to
the camera (multiple choice between two colours), which is bigger (3-D size), is A left of B in the
first frame (yes/no), how far is A from the first camera and how far apart are A and B (numeric,
metres rounded to 1..9, scored by mean relative accuracy). General: the shape of a colour, whether a
colour is present, how many objects (count). Every answer is one token of `VOCAB`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from paperworks.services.vlm.spatiolm import world

NUMBERS = tuple(str(i) for i in range(1, 10))
SPECIALS = ("<pad>", "?", "or")
WORDS = (
    "which",
    "closer",
    "bigger",
    "is",
    "left",
    "of",
    "how",
    "far",
    "apart",
    "what",
    "shape",
    "there",
    "many",
    "objects",
    "a",
)
ANSWERS = world.COLORS + world.SHAPES + ("yes", "no") + NUMBERS
VOCAB = SPECIALS + WORDS + ANSWERS
INDEX = {w: i for i, w in enumerate(VOCAB)}
ANSWER_IDS = tuple(INDEX[a] for a in ANSWERS)
MAX_TEXT = 8
SPATIAL = ("closer", "bigger", "left", "depth", "distance")
GENERAL = ("shape", "present", "count")
NUMERIC = ("depth", "distance", "count")


def encode(words: list[str] | str) -> list[int]:
    """Word ids, padded on the left to MAX_TEXT; KeyError names an unknown word, ValueError a long text."""
    if isinstance(words, str):
        words = words.split()
    if len(words) > MAX_TEXT:
        raise ValueError(f"at most {MAX_TEXT} words")
    for w in words:
        if w not in INDEX:
            raise KeyError(w)
    return [INDEX["<pad>"]] * (MAX_TEXT - len(words)) + [INDEX[w] for w in words]


def _number(x: float) -> str:
    return str(int(np.clip(np.rint(x), 1, 9)))


def question(scene: world.Scene, qtype: str, rng: np.random.Generator) -> tuple[list[str], str]:
    """(question words, answer word) of type `qtype` about `scene`."""
    objs = scene.objects
    cam = scene.cameras[0]
    i, j = rng.permutation(len(objs))[:2]
    a, b = objs[i], objs[j]
    ca, cb = world.COLORS[a.color], world.COLORS[b.color]
    if qtype == "closer":
        za, zb = cam.project(a.center)[2], cam.project(b.center)[2]
        return ["which", "closer", ca, "or", cb, "?"], ca if za < zb else cb
    if qtype == "bigger":
        return ["which", "bigger", ca, "or", cb, "?"], ca if a.size > b.size else cb
    if qtype == "left":
        return ["is", ca, "left", "of", cb, "?"], "yes" if cam.project(a.center)[0] < cam.project(b.center)[
            0
        ] else "no"
    if qtype == "depth":
        return ["how", "far", "is", ca, "?"], _number(cam.project(a.center)[2])
    if qtype == "distance":
        return ["how", "far", "apart", ca, cb, "?"], _number(np.linalg.norm(a.center - b.center))
    if qtype == "shape":
        return ["what", "shape", "is", ca, "?"], world.SHAPES[a.shape]
    if qtype == "present":
        c = int(rng.integers(0, len(world.COLORS)))
        return ["is", "there", "a", world.COLORS[c], "?"], "yes" if c in {o.color for o in objs} else "no"
    if qtype == "count":
        return ["how", "many", "objects", "?"], str(len(objs))
    raise ValueError(f"unknown question type {qtype!r}")


@dataclass
class Batch:
    """Rendered frames with their QA: `images` (N, F, S, S, 3), `depth` (N, F, S, S), `rays`
    (N, F, S, S, 6), `tokens` (N, MAX_TEXT), `answers` (N,) indices into ANSWERS, `qtypes` (N,)."""

    images: np.ndarray
    depth: np.ndarray
    rays: np.ndarray
    tokens: np.ndarray
    answers: np.ndarray
    qtypes: np.ndarray


def sample(rng: np.random.Generator, n: int, qtypes: tuple[str, ...], frames: int = 1) -> Batch:
    """n scenes, one question each, its type drawn uniformly from `qtypes`."""
    out = {k: [] for k in ("images", "depth", "rays", "tokens", "answers", "qtypes")}
    for _ in range(n):
        scene = world.random_scene(rng, frames)
        r = world.render_all(scene)
        qt = qtypes[int(rng.integers(0, len(qtypes)))]
        words, ans = question(scene, qt, rng)
        out["images"].append(r["image"])
        out["depth"].append(r["depth"])
        out["rays"].append(r["rays"])
        out["tokens"].append(encode(words))
        out["answers"].append(ANSWERS.index(ans))
        out["qtypes"].append(qt)
    return Batch(**{k: np.asarray(v) for k, v in out.items()})


def mean_relative_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """VSI-Bench MRA: mean over theta in {0.50, 0.55, ..., 0.95} of 1[|y_hat - y| / y < 1 - theta]."""
    pred, truth = np.asarray(pred, float), np.asarray(truth, float)
    rel = np.abs(pred - truth) / truth
    thetas = np.arange(0.5, 0.96, 0.05)
    return float(np.mean([(rel < 1 - t).mean() for t in thetas]))


def scores(pred: np.ndarray, batch: Batch) -> dict[str, float]:
    """Accuracy per question type, and MRA for the numeric ones; `pred` are ANSWERS indices."""
    out = {}
    for qt in dict.fromkeys(batch.qtypes.tolist()):
        m = batch.qtypes == qt
        out[f"{qt}_accuracy"] = float((pred[m] == batch.answers[m]).mean())
        if qt in NUMERIC:
            p = np.array([float(ANSWERS[k]) if ANSWERS[k] in NUMBERS else 0.0 for k in pred[m]])
            out[f"{qt}_mra"] = mean_relative_accuracy(
                p, np.array([float(ANSWERS[k]) for k in batch.answers[m]])
            )
    return out
