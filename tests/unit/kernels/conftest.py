"""Shared fixtures of the kernel tests: built backends, forced backends, random weights.

Triton's interpreter must be switched on before triton is first imported: tests/conftest.py
sets ``TRITON_INTERPRET=1`` on machines without a GPU.
The CPU extension and the CUDA library are built once per session (cached on disk across sessions).
"""

from __future__ import annotations

import contextlib
import os
from types import SimpleNamespace

import pytest
import torch
from hypothesis import settings
from paperworks.kernels import backends, packing

# Small and deterministic: applied per test (``@settings(settings.get_profile("kernels"))``)
# so the rest of the project's hypothesis settings stay untouched.
settings.register_profile("kernels", max_examples=20, deadline=None, derandomize=True)


@pytest.fixture(scope="session")
def cpu_ops():
    """The built CPU extension namespace (skips where it cannot be built)."""
    from paperworks.kernels.cpu import build

    ops = build.load()
    if ops is None:
        pytest.skip("the CPU extension could not be built here (see the log)")
    return ops


@pytest.fixture(scope="session")
def make():
    """Random packed weights with their dense forms, and the closeness check of linears.

    (A fixture rather than imports, since the tests run with ``--import-mode=importlib``.)
    """
    return SimpleNamespace(binary=random_binary, int2=random_int2, vq=random_vq,
                           weights=random_weights, generator=generator, forced=forced,
                           assert_linear_close=assert_linear_close)


@contextlib.contextmanager
def forced(name: str):
    """Forces a backend through the environment variable inside the block."""
    old = os.environ.get(backends.ENV)
    os.environ[backends.ENV] = name
    try:
        yield
    finally:
        if old is None:
            del os.environ[backends.ENV]
        else:
            os.environ[backends.ENV] = old


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_weights(n: int, m: int, seed: int) -> torch.Tensor:
    return torch.randn(n, m, generator=generator(seed))


def random_binary(n: int, m: int, paths: int, seed: int):
    """Packed signs and alphas of a random ``(n, m)`` matrix, plus its dense form."""
    signs, alpha = packing.binarize_residual(random_weights(n, m, seed), paths)
    return signs, alpha, packing.dequantize_binary(signs, alpha, m)


def random_int2(n: int, m: int, group: int, seed: int, with_offset: bool = True):
    codes, scale, offset = packing.quantize_int2(random_weights(n, m, seed), group)
    offset = offset if with_offset else None
    return codes, scale, offset, packing.dequantize_int2(codes, scale, offset, group, m)


def random_vq(n: int, m: int, group: int | None, seed: int):
    g = generator(seed)
    codebook = torch.randn(packing.VQ_CODEBOOK_SIZE, packing.VQ_DIM, generator=g)
    codes = torch.randint(0, 256, (n, -(-m // 4)), generator=g, dtype=torch.uint8)
    scale = None
    if group is not None:
        scale = torch.rand(n, packing.num_groups(m, group), generator=g) + 0.5
    return codes, codebook, scale, packing.dequantize_vq(codes, codebook, m, scale, group)


def assert_linear_close(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor, ref: torch.Tensor):
    """``y`` matches ``ref`` within fp32 rounding of ``x @ w.T`` (error ~ eps * |x| @ |w|)."""
    bound = 2e-5 * (x.abs() @ w.abs().T) + 1e-5
    assert y.shape == ref.shape and y.dtype == ref.dtype
    assert ((y - ref).abs() <= bound).all(), float(((y - ref).abs() - bound).max())
