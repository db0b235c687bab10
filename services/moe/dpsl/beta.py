"""Beta(a, b) CDF and PDF on the tensors' device, without host synchronisation.

DPSL (Mirvakhabova et al., ICML 2026, arXiv 2510.01185) compares each expert's routing
probabilities with the marginal of a Dirichlet prior, `p_k ~ Beta(alpha_k, alpha_0 - alpha_k)`, and
its gradient needs the Beta PDF (`dF/dp`). PyTorch has no regularised incomplete beta function, and
the Batch-Shaping reference (Bejnordi et al., ICLR 2020, `batchshaping/cdf_beta.py`) evaluates it
with scipy on the host every step. Here the CDF is tabulated once per (a, b) on a uniform grid
(scipy's `betainc`, at construction) and evaluated on the device by **cubic Hermite interpolation**
of the CDF values and PDF slopes at the knots (slopes limited by Fritsch-Carlson so the interpolant is
monotone). In the two end cells the CDF follows its asymptotes, `F(x) ~ F(h) (x / h)^a` near 0 and
`1 - F(x) ~ (1 - F(1 - h)) ((1 - x) / h)^b` near 1, which stay exact to O(h) where the PDF is singular
(a < 1 or b < 1, the sparse priors DPSL uses). The op's derivative is the interpolant's exact
derivative, so `BetaTable.pdf` is the PDF the backward pass uses and `torch.autograd.gradcheck` holds exactly.

This belongs in the kernel library (`paperworks.kernels.ops.beta_cdf_pdf`); it lives here until it
moves (see services/moe/README.md).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import special

KNOTS = 4097


def _tables(a: np.ndarray, b: np.ndarray, knots: int) -> tuple[np.ndarray, np.ndarray]:
    """CDF values and monotone Hermite slopes at `knots` uniform points of [0, 1], one row per (a, b)."""
    x = np.linspace(0.0, 1.0, knots)
    cdf = special.betainc(a[:, None], b[:, None], x[None, :])
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        logpdf = (
            (a[:, None] - 1) * np.log(x[None, :])
            + (b[:, None] - 1) * np.log1p(-x[None, :])
            - special.betaln(a, b)[:, None]
        )
        pdf = np.exp(logpdf)
    pdf = np.nan_to_num(pdf, nan=np.inf, posinf=np.inf)
    h = 1.0 / (knots - 1)
    secant = np.diff(cdf, axis=1) / h  # (rows, knots - 1), >= 0
    bound = np.full_like(pdf, np.inf)
    bound[:, :-1] = 3.0 * secant
    bound[:, 1:] = np.minimum(bound[:, 1:], 3.0 * secant)
    slope = np.minimum(pdf, bound)  # Fritsch-Carlson: 0 <= slope <= 3 secant keeps it monotone
    return cdf, slope


class _HermiteCDF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cdf, slope, a, b):
        value, derivative = _evaluate(x, cdf, slope, a, b)
        ctx.save_for_backward(derivative)
        return value

    @staticmethod
    def backward(ctx, grad):
        (derivative,) = ctx.saved_tensors
        return grad * derivative, None, None, None, None


def _evaluate(x: torch.Tensor, cdf: torch.Tensor, slope: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
    """(F(x), F'(x)) for x of shape (..., K) against tables of shape (K, knots) and parameters (K,)."""
    knots = cdf.shape[-1]
    shape = x.shape
    flat = x.reshape(-1, shape[-1]).clamp(0.0, 1.0)
    pos = flat * (knots - 1)
    idx = pos.floor().long().clamp(max=knots - 2)
    t = pos - idx
    cdf_t, slope_t = cdf.t().to(flat.dtype), slope.t().to(flat.dtype)
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
    a, b = a.to(flat.dtype), b.to(flat.dtype)
    first, last = idx == 0, idx == knots - 2
    t_lo = t.clamp(min=1e-6)  # the derivative's singularity at 0 (a < 1) is cut at t = 1e-6
    u_lo = (1 - t).clamp(min=1e-6)
    head = f1 * t.pow(a)
    tail = 1 - (1 - f0) * (1 - t).pow(b)
    value = torch.where(first, head, torch.where(last, tail, value))
    derivative = torch.where(
        first,
        f1 * a * t_lo.pow(a - 1) / h,
        torch.where(last, (1 - f0) * b * u_lo.pow(b - 1) / h, derivative),
    )
    outside = (x.reshape(flat.shape) < 0) | (x.reshape(flat.shape) > 1)
    derivative = torch.where(outside, torch.zeros_like(derivative), derivative)
    return value.reshape(shape), derivative.reshape(shape)


class BetaTable:
    """Beta(a_k, b_k) for K distributions, tabulated once; `cdf(x)` / `pdf(x)` for x of shape (..., K)."""

    def __init__(self, a, b, device: str | torch.device = "cpu", knots: int = KNOTS):
        a = np.atleast_1d(np.asarray(a, dtype=np.float64))
        b = np.atleast_1d(np.asarray(b, dtype=np.float64))
        if a.shape != b.shape or a.ndim != 1:
            raise ValueError("a and b must be 1-D and of the same length")
        if not (np.all(a > 0) and np.all(b > 0) and np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            raise ValueError("Beta parameters must be finite and positive")
        if knots < 3:
            raise ValueError("at least 3 knots")
        cdf, slope = _tables(a, b, knots)
        self.a, self.b = a, b
        self.cdf_table = torch.as_tensor(cdf, dtype=torch.float64, device=device)
        self.slope_table = torch.as_tensor(slope, dtype=torch.float64, device=device)
        self.a_t = torch.as_tensor(a, dtype=torch.float64, device=device)
        self.b_t = torch.as_tensor(b, dtype=torch.float64, device=device)

    def to(self, device) -> BetaTable:
        self.cdf_table = self.cdf_table.to(device)
        self.slope_table = self.slope_table.to(device)
        self.a_t, self.b_t = self.a_t.to(device), self.b_t.to(device)
        return self

    def cdf(self, x: torch.Tensor) -> torch.Tensor:
        """F_k(x[..., k]), differentiable in x (the gradient is `pdf`)."""
        return _HermiteCDF.apply(x, self.cdf_table, self.slope_table, self.a_t, self.b_t)

    def pdf(self, x: torch.Tensor) -> torch.Tensor:
        """dF_k/dx at x[..., k] (the interpolant's derivative; 0 outside [0, 1])."""
        return _evaluate(x.detach(), self.cdf_table, self.slope_table, self.a_t, self.b_t)[1]


def beta_cdf(x: torch.Tensor, a, b) -> torch.Tensor:
    """One-shot Beta CDF (builds the table; keep a `BetaTable` to reuse it across steps)."""
    return BetaTable(a, b, x.device).cdf(x)


def beta_pdf(x: torch.Tensor, a, b) -> torch.Tensor:
    return BetaTable(a, b, x.device).pdf(x)
