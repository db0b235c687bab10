"""The public kernel API: the only module the services call.

Every op validates its inputs, brings them to the canonical form all backends share
(float32 ``(B, M)`` activations, contiguous packed weights, batched costs, 3-D grids, ``(N, K)``
points against a table), runs the backend :func:`paperworks.kernels.backends.select` picks,
and restores the caller's shapes and dtype. Packed formats are documented in
:mod:`paperworks.kernels.packing`.
"""

from __future__ import annotations

import torch

from . import backends, packing
from .results import BetaCdfPdf, GridContraction, SinkhornResult
from .tables import BetaTable, beta_table

__all__ = [
    "BetaCdfPdf",
    "BetaTable",
    "GridContraction",
    "SinkhornResult",
    "backend_for",
    "beta_cdf_pdf",
    "beta_table",
    "binary_linear",
    "grid_contract",
    "int2_linear",
    "lattice_linear",
    "sinkhorn",
    "vq_linear",
]


def backend_for(op: str, device: torch.device | str = "cpu") -> str:
    """Name of the backend that would run ``op`` on ``device`` right now."""
    return backends.select(op, torch.device(device)).NAME


def _f32(t: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    if t is None:
        return None
    return t.to(device=device, dtype=torch.float32).contiguous()


def _check_shape(name: str, t: torch.Tensor | None, shape: tuple[int, ...]) -> None:
    if t is not None and tuple(t.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {shape}")


def _packed(name: str, t: torch.Tensor, shape: tuple[int, ...], device) -> torch.Tensor:
    if t.dtype != torch.uint8:
        raise TypeError(f"{name} must be torch.uint8 packed codes, got {t.dtype}")
    _check_shape(name, t, shape)
    return t.to(device).contiguous()


def _run_linear(op: str, x: torch.Tensor, n: int, *args) -> torch.Tensor:
    if not x.is_floating_point():
        raise TypeError(f"x must be floating point, got {x.dtype}")
    lead, m = x.shape[:-1], x.shape[-1]
    x2 = x.reshape(-1, m).to(torch.float32).contiguous()
    if x2.shape[0] == 0:
        return x.new_zeros(*lead, n)
    y = getattr(backends.select(op, x.device), op)(x2, *args)
    return y.to(x.dtype).reshape(*lead, n)


def binary_linear(
    x: torch.Tensor,
    signs: torch.Tensor,
    alpha: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Residual binary linear ``y = sum_k alpha_k * (sign(W_k) x) + bias`` (RaBiT).

    ``x`` is ``(..., M)``; ``signs`` uint8 ``(K, N, ceil(M/8))`` sign bits; ``alpha``
    ``(K, N)``; ``bias`` ``(N,)``. Returns ``(..., N)`` in ``x``'s dtype.
    """
    m, dev = x.shape[-1], x.device
    if signs.dim() != 3:
        raise ValueError("signs must be (K, N, ceil(M/8))")
    k, n = signs.shape[:2]
    signs = _packed("signs", signs, (k, n, -(-m // packing.SIGN_BITS)), dev)
    _check_shape("alpha", alpha, (k, n))
    _check_shape("bias", bias, (n,))
    return _run_linear("binary_linear", x, n, signs, _f32(alpha, dev), _f32(bias, dev))


def int2_linear(
    x: torch.Tensor,
    codes: torch.Tensor,
    scale: torch.Tensor,
    offset: torch.Tensor | None = None,
    *,
    group_size: int = 128,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """2-bit linear with ``W[n, m] = scale[n, m // G] * code + offset[n, m // G]`` (LC-QAT SQ).

    ``codes`` uint8 ``(N, ceil(M/4))``; ``scale``/``offset`` ``(N, ceil(M/G))`` with
    ``G = group_size`` a multiple of 4; no offset means 0. Returns ``(..., N)``.
    """
    m, dev = x.shape[-1], x.device
    if codes.dim() != 2:
        raise ValueError("codes must be (N, ceil(M/4))")
    n = codes.shape[0]
    codes = _packed("codes", codes, (n, -(-m // packing.INT2_PER_BYTE)), dev)
    groups = (n, packing.num_groups(m, group_size))
    _check_shape("scale", scale, groups)
    _check_shape("offset", offset, groups)
    _check_shape("bias", bias, (n,))
    return _run_linear("int2_linear", x, n, codes, _f32(scale, dev), _f32(offset, dev),
                       group_size, _f32(bias, dev))


def vq_linear(
    x: torch.Tensor,
    codes: torch.Tensor,
    codebook: torch.Tensor,
    scale: torch.Tensor | None = None,
    *,
    group_size: int | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Vector-quantized linear, ``W[n, 4i:4i+4] = codebook[codes[n, i]]`` (LC-QAT VQ).

    ``codes`` uint8 ``(N, ceil(M/4))``; ``codebook`` ``(256, 4)``; optional ``scale``
    ``(N, ceil(M/G))`` multiplies each group of ``G = group_size`` columns. Any codebook
    works; LC-QAT's affine lattice codebooks run faster through :func:`lattice_linear`.
    """
    m, dev = x.shape[-1], x.device
    if codes.dim() != 2:
        raise ValueError("codes must be (N, ceil(M/4))")
    n = codes.shape[0]
    codes = _packed("codes", codes, (n, -(-m // packing.VQ_DIM)), dev)
    _check_shape("codebook", codebook, (packing.VQ_CODEBOOK_SIZE, packing.VQ_DIM))
    if scale is not None:
        if group_size is None:
            raise ValueError("a scale needs its group_size")
        _check_shape("scale", scale, (n, packing.num_groups(m, group_size)))
    else:
        group_size = None
    _check_shape("bias", bias, (n,))
    return _run_linear("vq_linear", x, n, codes, _f32(codebook, dev), _f32(scale, dev),
                       group_size, _f32(bias, dev))


def lattice_linear(
    x: torch.Tensor,
    codes: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    scale: torch.Tensor | None = None,
    *,
    group_size: int | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """LC-QAT's affine lattice VQ, ``W[n, 4i:4i+4] = A z + b`` for 2-bit lattice points ``z``.

    Same result as :func:`vq_linear` with ``packing.lattice_codebook(a, b)``, computed by
    folding the map into the activations: per 4-column block ``x_q``,
    ``(A z + b) . x_q = z . (A^T x_q) + b . x_q``, so the weights run through the 2-bit
    kernel (``codes`` are the packed ``z``) on ``A^T x`` and ``b . x_q`` adds a per-group
    term. ``a`` is ``(4, 4)``, ``b`` ``(4,)``, ``scale``/``group_size`` as in vq_linear.
    """
    m, dev = x.shape[-1], x.device
    if codes.dim() != 2:
        raise ValueError("codes must be (N, ceil(M/4))")
    n, blocks = codes.shape[0], -(-m // packing.VQ_DIM)
    _check_shape("a", a, (packing.VQ_DIM, packing.VQ_DIM))
    _check_shape("b", b, (packing.VQ_DIM,))
    if scale is None:
        group_size = blocks * packing.VQ_DIM
        scale = torch.ones(n, 1, device=dev)
    elif group_size is None:
        raise ValueError("a scale needs its group_size")
    _check_shape("scale", scale, (n, packing.num_groups(m, group_size)))
    lead = x.shape[:-1]
    x4 = torch.nn.functional.pad(x.reshape(-1, m).float(), (0, blocks * packing.VQ_DIM - m))
    x4 = x4.reshape(-1, blocks, packing.VQ_DIM)
    folded = (x4 @ _f32(a, dev)).reshape(x4.shape[0], -1)
    per_block = x4 @ _f32(b, dev)
    per_group = torch.nn.functional.pad(per_block, (0, (-blocks) % (group_size // 4)))
    per_group = per_group.reshape(x4.shape[0], -1, group_size // 4).sum(-1)
    y = int2_linear(folded, codes, scale, group_size=group_size, bias=bias)
    y = y + per_group @ _f32(scale, dev).T
    return y.to(x.dtype).reshape(*lead, n)


def sinkhorn(
    cost: torch.Tensor,
    a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    *,
    epsilon: float = 0.05,
    max_iter: int = 1000,
    tol: float = 1e-6,
    check_every: int = 10,
) -> SinkhornResult:
    """Batched entropic OT by log-domain Sinkhorn, stable for small ``epsilon``.

    ``cost`` is ``(B, n, m)`` or ``(n, m)``; marginals ``a`` ``(B, n)``, ``b`` ``(B, m)``
    (uniform when omitted) must be non-negative with equal totals. Stops after ``max_iter``
    iterations or once the L1 row-marginal error is below ``tol`` for every batch element
    (checked every ``check_every`` iterations). float64 stays float64, else float32.
    """
    if cost.dim() not in (2, 3):
        raise ValueError("cost must be (B, n, m) or (n, m)")
    if epsilon <= 0 or max_iter < 0 or check_every < 1:
        raise ValueError("need epsilon > 0, max_iter >= 0, check_every >= 1")
    single = cost.dim() == 2
    dtype = torch.float64 if cost.dtype == torch.float64 else torch.float32
    c = (cost[None] if single else cost).to(dtype).contiguous()
    bsz, n, m = c.shape
    if n == 0 or m == 0:
        raise ValueError("cost must have at least one row and one column")
    if not torch.isfinite(c).all():
        raise ValueError("cost must be finite")
    marginals = []
    for name, v, size in (("a", a, n), ("b", b, m)):
        v = torch.full((bsz, size), 1.0 / size, dtype=dtype, device=c.device) if v is None else v
        v = (v[None] if v.dim() == 1 else v).to(device=c.device, dtype=dtype)
        v = v.expand(bsz, size).contiguous()
        if (v < 0).any():
            raise ValueError(f"{name} must be non-negative")
        marginals.append(v)
    sa, sb = marginals[0].sum(-1), marginals[1].sum(-1)
    if not torch.allclose(sa, sb, rtol=1e-5, atol=0) or not (sa > 0).all():
        raise ValueError("a and b must have equal, positive totals")
    out = backends.select("sinkhorn", c.device).sinkhorn(
        c, *marginals, float(epsilon), int(max_iter), float(tol), int(check_every)
    )
    if single:
        out = SinkhornResult(out.plan[0], out.cost[0], out.f[0], out.g[0], out.n_iter,
                             out.error[0])
    return out


def grid_contract(
    image: torch.Tensor, weights: torch.Tensor, threshold: float
) -> GridContraction:
    """Contracts every grid edge whose merge weight is ``< threshold`` (union-find).

    ``image`` is ``(D, H, W)`` or ``(H, W)``; ``weights`` is ``(ndim, *image.shape)`` with
    ``weights[a, i]`` the weight of the edge from voxel ``i`` to its +1 neighbour along
    axis ``a`` (the last slice along each axis has no such edge and is ignored). Returns
    the region labels, per-region sums and the region adjacency graph.
    """
    if image.dim() not in (2, 3) or image.numel() == 0:
        raise ValueError("image must be a non-empty 2-D or 3-D tensor")
    _check_shape("weights", weights, (image.dim(), *image.shape))
    img = image.to(torch.float32).contiguous()
    w = weights.to(device=img.device, dtype=torch.float32)
    if image.dim() == 2:
        img = img[None]
        w = torch.cat([torch.zeros_like(w[:1]), w])[:, None]
    out = backends.select("grid_contract", img.device).grid_contract(
        img, w.contiguous(), float(threshold)
    )
    return out._replace(labels=out.labels.reshape(image.shape))


class _BetaCDF(torch.autograd.Function):
    """The CDF with the PDF the same evaluation returns as its derivative (no second pass)."""

    @staticmethod
    def forward(ctx, x, cdf, slope, a, b):
        value, derivative = backends.select("beta_cdf_pdf", x.device).beta_cdf_pdf(x, cdf, slope, a, b)
        ctx.save_for_backward(derivative)
        ctx.mark_non_differentiable(derivative)
        return value, derivative

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_value, grad_derivative):
        (derivative,) = ctx.saved_tensors
        return grad_value * derivative, None, None, None, None


def beta_cdf_pdf(x: torch.Tensor, table: BetaTable) -> BetaCdfPdf:
    """Beta CDFs ``F_k(x[..., k])`` and PDFs ``F_k'(x[..., k])`` of a :func:`beta_table`'s K
    distributions, on ``x``'s device without a host synchronisation.

    ``x`` is ``(..., K)``; float64 is computed in float64, other float dtypes in float32, and
    both results come back in ``x``'s dtype. ``cdf`` is differentiable in ``x`` with gradient
    exactly ``pdf`` (once: no second derivative); values outside [0, 1] clamp (CDF 0 or 1,
    PDF 0) and NaN stays NaN. The table is read on ``x``'s device (build it there: another
    device costs a copy per call). Accuracy with the default 4097 knots: CDF within ~5e-4 of
    scipy's, PDF within 2% away from the singular ends.
    """
    if not isinstance(table, BetaTable):
        raise TypeError(f"table must be a BetaTable (ops.beta_table), got {type(table).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be floating point, got {x.dtype}")
    if x.dim() == 0 or x.shape[-1] != table.rows:
        raise ValueError(f"x has shape {tuple(x.shape)}, expected (..., {table.rows}): one column "
                         f"per tabulated distribution")
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    tensors = [t.to(device=x.device, dtype=dtype) for t in (table.cdf, table.slope, table.a, table.b)]
    x2 = x.reshape(-1, table.rows).to(dtype)
    value, derivative = _BetaCDF.apply(x2, *tensors)
    return BetaCdfPdf(value.to(x.dtype).reshape(x.shape), derivative.to(x.dtype).reshape(x.shape))
