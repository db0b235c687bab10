"""Triton backend of the low-bit linear ops, for GPUs (and the CPU via the interpreter).

Triton compiles only for GPUs; on a CPU host its interpreter (``TRITON_INTERPRET=1``, set
before the kernels are first imported) runs the same kernels with numpy, which is how the
tests check them. The kernels are in :mod:`.linear`, imported on first use.
"""

from __future__ import annotations

import os

import torch

NAME = "triton"
OPS = frozenset({"binary_linear", "int2_linear", "vq_linear"})


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").lower() in ("1", "true", "yes", "on")


def available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available() or interpreted()


def runs_on(device) -> bool:
    return device.type == "cuda" or (device.type == "cpu" and interpreted())


def binary_linear(x, signs, alpha, bias):
    from . import linear

    return linear.binary_linear(x, signs, alpha, bias)


def int2_linear(x, codes, scale, offset, group_size, bias):
    from . import linear

    return linear.int2_linear(x, codes, scale, offset, group_size, bias)


def vq_linear(x, codes, codebook, scale, group_size, bias):
    from . import linear

    return linear.vq_linear(x, codes, codebook, scale, group_size, bias)
