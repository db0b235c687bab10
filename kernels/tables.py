"""Lookup tables an op reads on the device, built once on the host: the Beta CDF's.

PyTorch has no regularised incomplete beta function, and evaluating one with scipy on the
host every step (as the Batch-Shaping reference, Bejnordi et al., ICLR 2020,
``batchshaping/cdf_beta.py``, does) costs a device-host round trip per call. Instead each
Beta(a_k, b_k) CDF is tabulated once on a uniform grid of ``knots`` points of [0, 1] (scipy's
``betainc``, exact to float64) with a slope per knot for cubic Hermite interpolation: the
PDF, limited by Fritsch-Carlson (``0 <= slope <= 3 * secant`` of both neighbouring cells) so
the interpolant is monotone like the CDF it stands for. :func:`paperworks.kernels.ops.beta_cdf_pdf`
evaluates it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

BETA_KNOTS = 4097  # 4096 cells: interpolation error ~1e-4 at the sparse priors' singular ends


class BetaTable(NamedTuple):
    """K Beta(a_k, b_k) distributions tabulated for :func:`~paperworks.kernels.ops.beta_cdf_pdf`.

    ``a``, ``b`` ``(K,)`` float64 parameters; ``cdf`` ``(K, knots)`` float64 CDF values at
    ``linspace(0, 1, knots)``; ``slope`` ``(K, knots)`` float64 monotone Hermite slopes there
    (``inf`` only where the PDF is infinite at an end knot, which the end cells never read).
    Build with :func:`beta_table`; all four tensors live on one device.
    """

    a: torch.Tensor
    b: torch.Tensor
    cdf: torch.Tensor
    slope: torch.Tensor

    @property
    def rows(self) -> int:
        """K, the number of distributions (the last dim of the op's ``x``)."""
        return self.a.shape[0]

    @property
    def device(self) -> torch.device:
        return self.cdf.device

    def to(self, device: torch.device | str) -> BetaTable:
        """The same table on ``device`` (the op reads it where ``x`` lives)."""
        return BetaTable(*(t.to(device) for t in self))


def _parameter(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().to("cpu", torch.float64).numpy()
    return np.atleast_1d(np.asarray(value, dtype=np.float64))


def beta_table(a, b, *, knots: int = BETA_KNOTS, device: torch.device | str = "cpu") -> BetaTable:
    """Tabulates Beta(a_k, b_k) for every k: ``a``, ``b`` 1-D of equal length (lists, arrays or
    tensors), finite and positive; ``knots >= 3``. Runs scipy on the host once, so build it
    once (per prior) and reuse it every step."""
    from scipy import special

    a, b = _parameter(a), _parameter(b)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("a and b must be 1-D, non-empty and of the same length")
    if not (np.all(a > 0) and np.all(b > 0) and np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("Beta parameters must be finite and positive")
    if knots < 3:
        raise ValueError("at least 3 knots")
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

    def tensor(v):
        return torch.as_tensor(v, dtype=torch.float64, device=device)

    return BetaTable(tensor(a), tensor(b), tensor(cdf), tensor(slope))
