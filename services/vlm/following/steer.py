"""Preference steering by SFT on boundary cases (modality following, ICML 2026 version §6).

Given an audit's conflict items, their relative uncertainty dH and the balance point x*:
- boundary cases: the `n` items nearest x* (|dH - x*| smallest; the paper's |dH - x*| < eps, and how
  many fall inside eps is reported);
- easy cases, the baseline: the `n` items where the target modality dominates most clearly (dH - x*
  largest for a vision target: the text is far more uncertain; smallest for a text target);
both labelled with the target modality's answer and trained with the same SFT budget.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from paperworks.services.vlm.following.conflicts import ConflictSet
from paperworks.services.vlm.tinyvlm.train import fit


def select_cases(relative: np.ndarray, x_star: float, n: int, selection: str, target: str) -> np.ndarray:
    d = relative - x_star
    if selection == "boundary":
        order = np.argsort(np.abs(d), kind="stable")
    elif selection == "easy":
        order = np.argsort(-d if target == "vision" else d, kind="stable")
    else:
        raise ValueError(f"selection must be boundary or easy, not {selection!r}")
    return order[:n]


def steer(
    model,
    items: ConflictSet,
    target: str,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    device: str,
    on_step: Callable[[int, float], None] | None = None,
) -> float:
    """SFT of `model` on `items` (bimodal, conflicting) labelled with the `target` modality's answer."""
    labels = items.visual_answer if target == "vision" else items.text_answer
    images, tokens = items.pixels("both"), items.tokens("both")
    rng = np.random.default_rng(seed)

    def batches(_step):
        i = rng.integers(0, len(items), min(batch_size, len(items)))
        return images[i], tokens[i], labels[i]

    return fit(model, batches, steps, lr, device, on_step)
