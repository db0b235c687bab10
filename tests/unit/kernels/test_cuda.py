"""CUDA sources: compiled with nvcc wherever nvcc exists (one architecture, cached), bound
through the C ABI, and run against the reference where a GPU exists."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from paperworks.kernels import cuda, ops, reference
from paperworks.kernels.cuda import build

KERNELS = settings(settings.get_profile("kernels"))
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")


@pytest.fixture(scope="session")
def library():
    if build.nvcc() is None:
        pytest.skip("nvcc is not installed")
    return cuda.bind(build.build())


def test_library_compiles_and_exports_the_c_abi(library):
    for name in cuda.SIGNATURES:
        assert getattr(library, name).restype is ctypes.c_int


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error path")
def test_calls_without_a_gpu_return_a_cuda_error(library):
    assert library.pwk_int2_linear(None, 1, 4, None, None, None, 4, 1, None, None, None) != 0


def test_backend_stays_off_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert not cuda.available()
    assert ops.backend_for("int2_linear", "cpu") != "cuda"


@needs_gpu
@KERNELS
@given(batch=st.sampled_from([1, 4, 5, 64]), n=st.integers(1, 70),
       m=st.sampled_from([1, 31, 64, 130, 1000]), seed=st.integers(0, 1000))
def test_linear_ops_on_gpu(make, batch, n, m, seed):
    x = torch.randn(batch, m, generator=make.generator(seed))
    signs, alpha, w = make.binary(n, m, 2, seed)
    with make.forced("cuda"):
        y = ops.binary_linear(x.cuda(), signs.cuda(), alpha.cuda()).cpu()
    make.assert_linear_close(y, x, w, reference.binary_linear(x, signs, alpha, None))
    codes, scale, offset, w = make.int2(n, m, 64, seed)
    with make.forced("cuda"):
        y = ops.int2_linear(x.cuda(), codes.cuda(), scale.cuda(), offset.cuda(),
                            group_size=64).cpu()
    make.assert_linear_close(y, x, w, reference.int2_linear(x, codes, scale, offset, 64, None))
    codes, codebook, vscale, w = make.vq(n, m, 32, seed)
    with make.forced("cuda"):
        y = ops.vq_linear(x.cuda(), codes.cuda(), codebook.cuda(), vscale.cuda(),
                          group_size=32).cpu()
    make.assert_linear_close(y, x, w,
                             reference.vq_linear(x, codes, codebook, vscale, 32, None))


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sinkhorn_on_gpu(make, dtype):
    rng = np.random.default_rng(0)
    cost = torch.tensor(rng.random((3, 17, 300)), dtype=dtype)
    a = torch.full((3, 17), 1 / 17, dtype=dtype)
    b = torch.full((3, 300), 1 / 300, dtype=dtype)
    ref = reference.sinkhorn(cost, a, b, 0.01, 40, 0.0, 10)
    with make.forced("cuda"):
        got = ops.sinkhorn(cost.cuda(), a.cuda(), b.cuda(), epsilon=0.01, max_iter=40, tol=0.0)
    assert got.n_iter == 40
    torch.testing.assert_close(got.plan.cpu(), ref.plan, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(got.cost.cpu(), ref.cost, rtol=1e-4, atol=1e-7)
