"""Cost-quality curves and their normalised area, the figure of merit SDR is compared on.

A policy family gives operating points (mean cost, mean quality). Mixing two operating points at
random across requests achieves any point on the segment between them, so a family achieves the
upper concave hull of its points. Every SDR-style policy can also return the local answer for
free, so (0, q_local) is added to every family's points. The normalised area is the mean of the
hull's quality over the cost range [0, c_max], c_max being the cost of always calling the best
remote: 1.0 would be perfect quality at any budget. Always-local scores q_local; always-best
scores (q_local + q_best) / 2 (random mixing of the two). Design follows the AIQ metric of
RouterBench (Hu et al., 2024) restricted to a common cost range.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def upper_hull(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The non-decreasing upper concave hull, sorted by cost."""
    pts = sorted(set(points))
    hull: list[tuple[float, float]] = []
    for p in pts:
        if hull and p[1] <= hull[-1][1]:
            continue  # costs more, no better
        if hull and p[0] == hull[-1][0]:
            hull.pop()  # same cost, better quality
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) >= 0:
            hull.pop()
        hull.append(p)
    return hull


def _cross(o, a, b) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def quality_at(hull: Sequence[tuple[float, float]], cost: np.ndarray) -> np.ndarray:
    xs, ys = zip(*hull, strict=True)
    return np.interp(cost, xs, ys, left=ys[0], right=ys[-1])


def normalized_area(
    points: Iterable[tuple[float, float]], local_quality: float, c_max: float, resolution: int = 2001
) -> float:
    hull = upper_hull([(0.0, local_quality), *points])
    grid = np.linspace(0.0, c_max, resolution)
    return float(np.trapezoid(quality_at(hull, grid), grid) / c_max)
