"""Result types of the ops that return more than one tensor, shared by every backend."""

from __future__ import annotations

from typing import NamedTuple

import torch


class SinkhornResult(NamedTuple):
    """Entropic OT solution per batch element.

    ``plan`` is ``(B, n, m)``; ``cost`` is ``<plan, C>`` per batch ``(B,)``; ``f`` ``(B, n)``
    and ``g`` ``(B, m)`` are the dual potentials with ``plan = exp((f_i + g_j - C_ij)/eps)``;
    ``n_iter`` is the number of full (row, column) updates done; ``error`` ``(B,)`` is the
    L1 error of the plan's row sums against ``a`` (its column sums match ``b`` exactly).
    """

    plan: torch.Tensor
    cost: torch.Tensor
    f: torch.Tensor
    g: torch.Tensor
    n_iter: int
    error: torch.Tensor


class GridContraction(NamedTuple):
    """A grid graph contracted into regions, i.e. a graph minor with its lifting map.

    ``labels`` (int64, the image's shape) maps every voxel to its region ``0..R-1``, regions
    numbered by their first voxel in raster (C) order. ``region_count`` (int64 ``(R,)``),
    ``region_sum`` and ``region_sq_sum`` (float64 ``(R,)``) sum 1, the intensity and its
    square over each region. ``edges`` (int64 ``(E, 2)``) are the unique adjacent region
    pairs ``i < j`` in lexicographic order, with ``edge_count`` (int64) grid edges between
    them whose merge weights add up to ``edge_weight_sum`` (float64).
    """

    labels: torch.Tensor
    region_count: torch.Tensor
    region_sum: torch.Tensor
    region_sq_sum: torch.Tensor
    edges: torch.Tensor
    edge_count: torch.Tensor
    edge_weight_sum: torch.Tensor


class BetaCdfPdf(NamedTuple):
    """Beta CDFs and PDFs at the same points, both shaped like the op's ``x``.

    ``cdf`` is differentiable in ``x`` and its gradient is exactly ``pdf`` (the derivative of
    the interpolant, so autograd and the returned PDF agree); ``pdf`` carries no gradient.
    """

    cdf: torch.Tensor
    pdf: torch.Tensor
