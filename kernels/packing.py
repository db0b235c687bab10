"""Packed weight formats shared by every backend, with pack/unpack helpers.

The services store quantized weights once and every backend (reference, CPU, CUDA, Triton)
reads the same bytes, so the formats are defined here and nowhere else. All packing is
along the input dimension ``M`` of a weight matrix ``(N, M)`` (torch's ``(out, in)``), and
every packed tensor is a contiguous ``torch.uint8`` tensor.

Sign bits (residual binary linear, RaBiT arXiv 2602.05367)
    ``signs[k, n, i]`` holds the signs of ``W_k[n, 8i : 8i+8]``: bit ``j`` (LSB first) is 1
    for ``+1`` and 0 for ``-1``; sign(0) is ``+1``. Shape ``(K, N, ceil(M/8))``; padding
    bits past ``M`` are 0 and ignored. ``alpha`` is float32 ``(K, N)``, one scale per path
    and output channel: ``W ~= sum_k alpha_k[:, None] * sign(W_k)``.

2-bit codes (scalar 2-bit QAT, LC-QAT arXiv 2606.10531)
    ``codes[n, i]`` holds the codes of ``W[n, 4i : 4i+4]``: the code of column ``4i+j`` sits
    in bits ``2j, 2j+1``. Shape ``(N, ceil(M/4))``, padding codes are 0. Per-group scale and
    offset are float32 ``(N, ceil(M/G))`` for a group size ``G`` (a positive multiple of 4,
    groups are runs of ``G`` consecutive input columns):
    ``W[n, m] = scale[n, m // G] * code[n, m] + offset[n, m // G]``; a missing offset is 0.

Vector codes (vector 2-bit QAT, LC-QAT)
    One byte per 4 consecutive weights: ``W[n, 4i : 4i+4] = codebook[codes[n, i]]`` with a
    float32 ``(256, 4)`` codebook per weight matrix, times an optional per-group scale as
    above. Same shape as the 2-bit codes, 2 bits per weight. LC-QAT's codewords are affine in
    a 2-bit lattice point, ``c(z) = A z + b`` with ``z`` in ``{0..3}^4``; with the byte of
    ``z`` packed like the 2-bit codes (``z_j`` in bits ``2j``), the VQ code *is* the 2-bit
    code byte, so :func:`lattice_codebook` builds the equivalent explicit codebook.
"""

from __future__ import annotations

import torch

SIGN_BITS = 8
INT2_PER_BYTE = 4
VQ_DIM = 4
VQ_CODEBOOK_SIZE = 256


def _pad_last(t: torch.Tensor, multiple: int) -> torch.Tensor:
    pad = (-t.shape[-1]) % multiple
    if pad == 0:
        return t
    return torch.nn.functional.pad(t, (0, pad))


def pack_signs(w: torch.Tensor) -> torch.Tensor:
    """Packs ``sign(w)`` (``>= 0`` is ``+1``) along the last dim, 8 per byte, LSB first."""
    bits = _pad_last((w >= 0).to(torch.uint8), SIGN_BITS)
    bits = bits.reshape(*bits.shape[:-1], -1, SIGN_BITS)
    shifts = torch.arange(SIGN_BITS, dtype=torch.uint8, device=w.device)
    return (bits << shifts).sum(-1, dtype=torch.uint8).contiguous()


def unpack_signs(packed: torch.Tensor, m: int) -> torch.Tensor:
    """Inverse of :func:`pack_signs`: float32 ``+-1`` of length ``m`` in the last dim."""
    shifts = torch.arange(SIGN_BITS, dtype=torch.uint8, device=packed.device)
    bits = (packed.unsqueeze(-1) >> shifts) & 1
    bits = bits.reshape(*packed.shape[:-1], -1)[..., :m]
    return bits.to(torch.float32) * 2 - 1


def pack_int2(q: torch.Tensor) -> torch.Tensor:
    """Packs integer codes in ``0..3`` along the last dim, 4 per byte, lowest bits first."""
    if q.numel() and (int(q.min()) < 0 or int(q.max()) > 3):
        raise ValueError("2-bit codes must lie in 0..3")
    codes = _pad_last(q.to(torch.uint8), INT2_PER_BYTE)
    codes = codes.reshape(*codes.shape[:-1], -1, INT2_PER_BYTE)
    shifts = torch.arange(0, 8, 2, dtype=torch.uint8, device=q.device)
    return (codes << shifts).sum(-1, dtype=torch.uint8).contiguous()


def unpack_int2(packed: torch.Tensor, m: int) -> torch.Tensor:
    """Inverse of :func:`pack_int2`: uint8 codes of length ``m`` in the last dim."""
    shifts = torch.arange(0, 8, 2, dtype=torch.uint8, device=packed.device)
    codes = (packed.unsqueeze(-1) >> shifts) & 3
    return codes.reshape(*packed.shape[:-1], -1)[..., :m]


def num_groups(m: int, group_size: int) -> int:
    """Number of scale groups for ``m`` input columns (the last one may be short)."""
    if group_size <= 0 or group_size % INT2_PER_BYTE:
        raise ValueError(f"group_size must be a positive multiple of 4, got {group_size}")
    return -(-m // group_size)


def _expand_groups(per_group: torch.Tensor, m: int, group_size: int) -> torch.Tensor:
    return per_group.repeat_interleave(group_size, dim=-1)[..., :m]


def dequantize_int2(
    codes: torch.Tensor,
    scale: torch.Tensor,
    offset: torch.Tensor | None,
    group_size: int,
    m: int,
) -> torch.Tensor:
    """Float32 ``(N, m)`` weights of the 2-bit format."""
    w = unpack_int2(codes, m).to(torch.float32) * _expand_groups(scale.float(), m, group_size)
    if offset is not None:
        w = w + _expand_groups(offset.float(), m, group_size)
    return w


def quantize_int2(
    w: torch.Tensor, group_size: int = 128
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Round-to-nearest min-max 2-bit quantization of ``(N, M)`` weights.

    Returns ``(codes, scale, offset)`` in the packed format; a starting point for QAT and
    the source of realistic test data, not a QAT method itself.
    """
    n, m = w.shape
    g = num_groups(m, group_size)
    padded = torch.nn.functional.pad(w.float(), (0, g * group_size - m))
    grouped = padded.reshape(n, g, group_size)
    # The padding columns must not widen a short last group's range.
    valid = torch.arange(g * group_size, device=w.device).reshape(g, group_size) < m
    lo = torch.where(valid, grouped, torch.inf).amin(-1)
    hi = torch.where(valid, grouped, -torch.inf).amax(-1)
    scale = (hi - lo) / 3
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round((grouped - lo[..., None]) / safe[..., None]).clamp(0, 3)
    codes = pack_int2(q.reshape(n, -1)[:, :m])
    return codes, scale.contiguous(), lo.contiguous()


def binarize_residual(w: torch.Tensor, paths: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy residual binarization of ``(N, M)`` weights into ``paths`` sign matrices.

    Each path binarizes what the previous ones left (``alpha_k`` = mean ``|r|`` per row),
    the sequential derivation RaBiT starts QAT from. Returns ``(signs, alpha)`` packed.
    """
    residual = w.float()
    signs, alphas = [], []
    for _ in range(paths):
        s = torch.where(residual >= 0, 1.0, -1.0)
        alpha = residual.abs().mean(-1)
        residual = residual - alpha[:, None] * s
        signs.append(pack_signs(s))
        alphas.append(alpha)
    return torch.stack(signs).contiguous(), torch.stack(alphas).contiguous()


def dequantize_binary(signs: torch.Tensor, alpha: torch.Tensor, m: int) -> torch.Tensor:
    """Float32 ``(N, m)`` weights ``sum_k alpha_k * sign(W_k)`` of the sign-bit format."""
    return (alpha.float()[..., None] * unpack_signs(signs, m)).sum(0)


def lattice_codebook(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The ``(256, 4)`` codebook ``c(z) = A z + b`` indexed by the packed byte of ``z``."""
    code = torch.arange(VQ_CODEBOOK_SIZE, device=a.device)
    z = torch.stack([(code >> (2 * j)) & 3 for j in range(VQ_DIM)], dim=-1).to(a.dtype)
    return (z @ a.T + b).float().contiguous()


def vq_encode(w: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """Nearest-codeword codes ``(N, ceil(M/4))`` of ``(N, M)`` weights (zero padded)."""
    n = w.shape[0]
    blocks = _pad_last(w.float(), VQ_DIM).reshape(n, -1, VQ_DIM)
    dist = torch.cdist(blocks.reshape(-1, VQ_DIM), codebook.float())
    return dist.argmin(-1).to(torch.uint8).reshape(n, -1).contiguous()


def dequantize_vq(
    codes: torch.Tensor,
    codebook: torch.Tensor,
    m: int,
    scale: torch.Tensor | None = None,
    group_size: int | None = None,
) -> torch.Tensor:
    """Float32 ``(N, m)`` weights of the vector-code format."""
    w = codebook.float()[codes.long()].reshape(codes.shape[0], -1)[:, :m]
    if scale is not None:
        w = w * _expand_groups(scale.float(), m, group_size)
    return w
