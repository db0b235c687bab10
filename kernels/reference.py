"""Plain PyTorch reference of every op: always available, on any device, and the oracle.

Each function states the op's definition as directly as torch allows, so the fast backends
are tested against it and it is the fallback when none of them can run. Inputs are the
canonical forms :mod:`paperworks.kernels.ops` hands to every backend: 2-D float32
activations ``(B, M)``, packed weights as in :mod:`paperworks.kernels.packing`, batched
``(B, n, m)`` costs, 3-D grids, ``(N, K)`` points against a :mod:`paperworks.kernels.tables`
table of K distributions.
"""

from __future__ import annotations

import torch

from . import packing
from .results import GridContraction, SinkhornResult

NAME = "reference"
OPS = frozenset(
    {"binary_linear", "int2_linear", "vq_linear", "sinkhorn", "grid_contract", "beta_cdf_pdf"}
)


def available() -> bool:
    return True


def runs_on(device) -> bool:
    return True


def binary_linear(x, signs, alpha, bias):
    """``y = sum_k alpha_k * (sign(W_k) x) + bias``."""
    m = x.shape[-1]
    y = torch.zeros(x.shape[0], signs.shape[1], dtype=torch.float32, device=x.device)
    for k in range(signs.shape[0]):
        y += alpha[k] * (x @ packing.unpack_signs(signs[k], m).T)
    return y if bias is None else y + bias


def int2_linear(x, codes, scale, offset, group_size, bias):
    """``y = x W^T + bias`` with ``W`` dequantized from per-group 2-bit codes."""
    w = packing.dequantize_int2(codes, scale, offset, group_size, x.shape[-1])
    return torch.nn.functional.linear(x, w, bias)


def vq_linear(x, codes, codebook, scale, group_size, bias):
    """``y = x W^T + bias`` with ``W`` looked up from a 4-D codebook."""
    w = packing.dequantize_vq(codes, codebook, x.shape[-1], scale, group_size)
    return torch.nn.functional.linear(x, w, bias)


def _row_lse(v, ce):
    return torch.logsumexp(v[:, None, :] - ce, dim=-1)


def sinkhorn(cost, a, b, epsilon, max_iter, tol, check_every):
    """Log-domain Sinkhorn on scaled potentials ``u = f/eps``, ``v = g/eps``.

    Each iteration sets ``u`` to fit the row marginals then ``v`` to fit the columns, so
    the columns always fit; every ``check_every`` iterations it stops once the L1 row error
    of every batch element is below ``tol``.
    """
    ce = cost / epsilon
    log_a, log_b = a.log(), b.log()
    u = torch.zeros_like(a)
    v = torch.zeros_like(b)
    n_iter = 0
    for it in range(max_iter):
        lse = _row_lse(v, ce)
        checked = it > 0 and it % check_every == 0
        if checked and (torch.exp(u + lse) - a).abs().sum(-1).max() < tol:
            break
        u = log_a - lse
        v = log_b - torch.logsumexp(u[:, :, None] - ce, dim=-2)
        n_iter = it + 1
    error = (torch.exp(u + _row_lse(v, ce)) - a).abs().sum(-1)
    plan = torch.exp(u[:, :, None] + v[:, None, :] - ce)
    return SinkhornResult(
        plan, (plan * cost).sum((-2, -1)), u * epsilon, v * epsilon, n_iter, error
    )


def _grid_pairs(shape, weights):
    """Flat indices of every grid edge ``(i, i + 1 along axis)`` with its weight."""
    index = torch.arange(shape.numel(), device=weights.device).reshape(shape)
    src, dst, w = [], [], []
    for axis, size in enumerate(shape):
        src.append(index.narrow(axis, 0, size - 1).reshape(-1))
        dst.append(index.narrow(axis, 1, size - 1).reshape(-1))
        w.append(weights[axis].narrow(axis, 0, size - 1).reshape(-1))
    return torch.cat(src), torch.cat(dst), torch.cat(w)


def _component_minimum(n, src, dst):
    """Smallest voxel index of each connected component, by min-label propagation."""
    labels = torch.arange(n, device=src.device)
    while True:
        low = torch.minimum(labels[src], labels[dst])
        new = labels.scatter_reduce(0, src, low, "amin").scatter_reduce(0, dst, low, "amin")
        new = new[new]
        if torch.equal(new, labels):
            return labels
        labels = new


def grid_contract(image, weights, threshold):
    """Union of every grid edge whose weight is ``< threshold``; 3-D ``(D, H, W)`` input."""
    shape = image.shape
    n = image.numel()
    src, dst, w = _grid_pairs(shape, weights)
    merged = w < threshold
    root = _component_minimum(n, src[merged], dst[merged])
    is_root = root == torch.arange(n, device=root.device)
    region = torch.cumsum(is_root, 0) - 1
    labels = region[root]
    r = int(is_root.sum())
    values = image.reshape(-1).double()
    count = torch.bincount(labels, minlength=r)
    total = torch.zeros(r, dtype=torch.float64, device=image.device).index_add_(0, labels, values)
    sq = torch.zeros_like(total).index_add_(0, labels, values * values)
    la, lb = labels[src], labels[dst]
    cut = la != lb
    lo, hi = torch.minimum(la, lb)[cut], torch.maximum(la, lb)[cut]
    keys, inverse = torch.unique(lo * r + hi, sorted=True, return_inverse=True)
    edges = torch.stack([keys // r, keys % r], dim=1)
    edge_count = torch.bincount(inverse, minlength=keys.numel())
    edge_w = torch.zeros(keys.numel(), dtype=torch.float64, device=image.device)
    edge_w.index_add_(0, inverse, w[cut].double())
    return GridContraction(labels.reshape(shape), count, total, sq, edges, edge_count, edge_w)


def beta_cdf_pdf(x, cdf, slope, a, b):
    """``(F_k(x[:, k]), F_k'(x[:, k]))`` for ``x`` ``(N, K)`` by cubic Hermite interpolation of the
    tabulated CDF values ``cdf`` and slopes ``slope`` ``(K, knots)`` (in ``x``'s dtype).

    In the two end cells the CDF follows its asymptotes instead, ``F(x) ~ F(h) (x/h)^a`` near 0
    and ``1 - F(x) ~ (1 - F(1-h)) ((1-x)/h)^b`` near 1, which stay exact to O(h) where the PDF is
    singular (a < 1 or b < 1). The second value is the interpolant's exact derivative (its
    singularity at an end cut at 1e-6 of a cell), 0 outside [0, 1]; NaN stays NaN in both.
    """
    knots = cdf.shape[-1]
    nan = torch.isnan(x)
    flat = torch.where(nan, torch.zeros_like(x), x).clamp(0.0, 1.0)
    pos = flat * (knots - 1)
    idx = pos.floor().long().clamp(max=knots - 2)
    t = pos - idx
    cdf_t, slope_t = cdf.t(), slope.t()
    f0, f1 = cdf_t.gather(0, idx), cdf_t.gather(0, idx + 1)
    s0, s1 = slope_t.gather(0, idx), slope_t.gather(0, idx + 1)
    h = 1.0 / (knots - 1)
    t2, t3 = t * t, t * t * t
    value = (
        (2 * t3 - 3 * t2 + 1) * f0 + (t3 - 2 * t2 + t) * h * s0 + (-2 * t3 + 3 * t2) * f1 + (t3 - t2) * h * s1
    )
    derivative = (
        (6 * t2 - 6 * t) * f0 / h
        + (3 * t2 - 4 * t + 1) * s0
        + (6 * t - 6 * t2) * f1 / h
        + (3 * t2 - 2 * t) * s1
    )
    first, last = idx == 0, idx == knots - 2
    t_lo = t.clamp(min=1e-6)
    u_lo = (1 - t).clamp(min=1e-6)
    head = f1 * t.pow(a)
    tail = 1 - (1 - f0) * (1 - t).pow(b)
    value = torch.where(first, head, torch.where(last, tail, value))
    derivative = torch.where(
        first,
        f1 * a * t_lo.pow(a - 1) / h,
        torch.where(last, (1 - f0) * b * u_lo.pow(b - 1) / h, derivative),
    )
    derivative = torch.where((x < 0) | (x > 1), torch.zeros_like(derivative), derivative)
    return torch.where(nan, x, value), torch.where(nan, x, derivative)
