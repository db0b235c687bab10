"""CPU C++ backend (OpenMP, AVX-512 where the CPU has it): all four ops on CPU tensors.

The kernels live in the ``.cpp`` files beside this module (see their headers for the
algorithms); :mod:`.build` compiles them once per machine. Functions take the canonical
arguments of :mod:`paperworks.kernels.reference` and return the same results. ``simd=False``
runs the portable scalar loops, which the tests compare with the SIMD ones.
"""

from __future__ import annotations

from ..results import GridContraction, SinkhornResult
from .build import load

NAME = "cpu"
OPS = frozenset({"binary_linear", "int2_linear", "vq_linear", "sinkhorn", "grid_contract"})


def available() -> bool:
    """True when the extension is built (building it on first call)."""
    return load() is not None


def runs_on(device) -> bool:
    return device.type == "cpu"


def binary_linear(x, signs, alpha, bias, simd=True):
    return load().binary_linear(x, signs, alpha, bias, simd)


def int2_linear(x, codes, scale, offset, group_size, bias, simd=True):
    return load().int2_linear(x, codes, scale, offset, group_size, bias, simd)


def vq_linear(x, codes, codebook, scale, group_size, bias, simd=True):
    return load().vq_linear(x, codes, codebook, scale, group_size or 0, bias, simd)


def sinkhorn(cost, a, b, epsilon, max_iter, tol, check_every):
    plan, total, f, g, error, n_iter = load().sinkhorn(
        cost, a, b, epsilon, max_iter, tol, check_every
    )
    return SinkhornResult(plan, total, f, g, n_iter, error)


def grid_contract(image, weights, threshold):
    return GridContraction(*load().grid_contract(image, weights, threshold))
