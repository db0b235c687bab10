"""Triton kernels of the low-bit linear ops (sign bits, 2-bit codes, vector codes).

Each program owns a ``BLOCK_B x BLOCK_N`` tile of the output and walks the input dim in
``BLOCK_K`` steps: it loads the packed bytes of a ``BLOCK_K x BLOCK_N`` weight tile,
decodes them in registers (bit shifts, per-group scale/offset, codebook gather) and feeds
``tl.dot`` in exact fp32 (batch <= 64 is memory-bound, so tensor-core precision buys
nothing). Importing this module decides between compiled and interpreted kernels
(``TRITON_INTERPRET=1``, how the tests run them on the CPU).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_B = 16
BLOCK_N = 32
BLOCK_K = 64


@triton.jit
def _tile_offsets(pid_b, pid_n, k0, B, N, M, BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = k0 + tl.arange(0, BLOCK_K)
    return offs_b, offs_n, offs_k


@triton.jit
def _load_x(x_ptr, offs_b, offs_k, B, M):
    mask = (offs_b[:, None] < B) & (offs_k[None, :] < M)
    return tl.load(x_ptr + offs_b[:, None] * M + offs_k[None, :], mask=mask, other=0.0)


@triton.jit
def _store_y(y_ptr, acc, bias_ptr, offs_b, offs_n, B, N, HAS_BIAS: tl.constexpr):
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    mask = (offs_b[:, None] < B) & (offs_n[None, :] < N)
    tl.store(y_ptr + offs_b[:, None] * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def _binary_kernel(x_ptr, signs_ptr, alpha_ptr, bias_ptr, y_ptr, B, N, M, PATHS,
                   HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    pid_n, pid_b = tl.program_id(0), tl.program_id(1)
    row_bytes = (M + 7) // 8
    acc = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    for k in range(PATHS):
        part = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, M, BLOCK_K):
            offs_b, offs_n, offs_k = _tile_offsets(pid_b, pid_n, k0, B, N, M, BLOCK_B,
                                                   BLOCK_N, BLOCK_K)
            x = _load_x(x_ptr, offs_b, offs_k, B, M)
            mask = (offs_k[:, None] < M) & (offs_n[None, :] < N)
            byte = tl.load(signs_ptr + (k * N + offs_n[None, :]) * row_bytes
                           + offs_k[:, None] // 8, mask=mask, other=0).to(tl.int32)
            bit = (byte >> (offs_k[:, None] % 8)) & 1
            part += tl.dot(x, bit.to(tl.float32) * 2.0 - 1.0, input_precision="ieee")
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        alpha = tl.load(alpha_ptr + k * N + offs_n, mask=offs_n < N, other=0.0)
        acc += part * alpha[None, :]
    offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    _store_y(y_ptr, acc, bias_ptr, offs_b, offs_n, B, N, HAS_BIAS)


@triton.jit
def _int2_kernel(x_ptr, codes_ptr, scale_ptr, offset_ptr, bias_ptr, y_ptr, B, N, M, GROUP,
                 HAS_OFFSET: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_n, pid_b = tl.program_id(0), tl.program_id(1)
    row_bytes = (M + 3) // 4
    groups = (M + GROUP - 1) // GROUP
    acc = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, M, BLOCK_K):
        offs_b, offs_n, offs_k = _tile_offsets(pid_b, pid_n, k0, B, N, M, BLOCK_B, BLOCK_N,
                                               BLOCK_K)
        x = _load_x(x_ptr, offs_b, offs_k, B, M)
        mask = (offs_k[:, None] < M) & (offs_n[None, :] < N)
        byte = tl.load(codes_ptr + offs_n[None, :] * row_bytes + offs_k[:, None] // 4,
                       mask=mask, other=0).to(tl.int32)
        code = ((byte >> (2 * (offs_k[:, None] % 4))) & 3).to(tl.float32)
        group = offs_n[None, :] * groups + offs_k[:, None] // GROUP
        w = code * tl.load(scale_ptr + group, mask=mask, other=0.0)
        if HAS_OFFSET:
            w += tl.load(offset_ptr + group, mask=mask, other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    _store_y(y_ptr, acc, bias_ptr, offs_b, offs_n, B, N, HAS_BIAS)


@triton.jit
def _vq_kernel(x_ptr, codes_ptr, codebook_ptr, scale_ptr, bias_ptr, y_ptr, B, N, M, GROUP,
               HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_n, pid_b = tl.program_id(0), tl.program_id(1)
    row_bytes = (M + 3) // 4
    groups = (M + GROUP - 1) // GROUP
    acc = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, M, BLOCK_K):
        offs_b, offs_n, offs_k = _tile_offsets(pid_b, pid_n, k0, B, N, M, BLOCK_B, BLOCK_N,
                                               BLOCK_K)
        x = _load_x(x_ptr, offs_b, offs_k, B, M)
        mask = (offs_k[:, None] < M) & (offs_n[None, :] < N)
        code = tl.load(codes_ptr + offs_n[None, :] * row_bytes + offs_k[:, None] // 4,
                       mask=mask, other=0).to(tl.int32)
        w = tl.load(codebook_ptr + code * 4 + offs_k[:, None] % 4, mask=mask, other=0.0)
        if HAS_SCALE:
            group = offs_n[None, :] * groups + offs_k[:, None] // GROUP
            w *= tl.load(scale_ptr + group, mask=mask, other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    _store_y(y_ptr, acc, bias_ptr, offs_b, offs_n, B, N, HAS_BIAS)


def _grid(batch: int, n: int) -> tuple[int, int]:
    return triton.cdiv(n, BLOCK_N), triton.cdiv(batch, BLOCK_B)


def _blocks() -> dict:
    return {"BLOCK_B": BLOCK_B, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K}


def binary_linear(x, signs, alpha, bias):
    (batch, m), (paths, n) = x.shape, alpha.shape
    y = torch.empty(batch, n, device=x.device, dtype=torch.float32)
    _binary_kernel[_grid(batch, n)](x, signs, alpha, bias if bias is not None else y, y,
                                    batch, n, m, paths, HAS_BIAS=bias is not None, **_blocks())
    return y


def int2_linear(x, codes, scale, offset, group_size, bias):
    (batch, m), n = x.shape, codes.shape[0]
    y = torch.empty(batch, n, device=x.device, dtype=torch.float32)
    _int2_kernel[_grid(batch, n)](x, codes, scale, offset if offset is not None else scale,
                                  bias if bias is not None else y, y, batch, n, m, group_size,
                                  HAS_OFFSET=offset is not None, HAS_BIAS=bias is not None,
                                  **_blocks())
    return y


def vq_linear(x, codes, codebook, scale, group_size, bias):
    (batch, m), n = x.shape, codes.shape[0]
    y = torch.empty(batch, n, device=x.device, dtype=torch.float32)
    _vq_kernel[_grid(batch, n)](x, codes, codebook, scale if scale is not None else codebook,
                                bias if bias is not None else y, y, batch, n, m,
                                group_size or m, HAS_SCALE=scale is not None,
                                HAS_BIAS=bias is not None, **_blocks())
    return y
