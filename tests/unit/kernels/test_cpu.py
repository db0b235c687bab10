"""The CPU C++ backend against the reference: random shapes, odd sizes, edge cases.

Batch sizes cross the 8-row register tile, widths cross the 16/64-column SIMD blocks, and
every linear op runs both its AVX-512 and its portable scalar path.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from paperworks.kernels import cpu, ops, reference

KERNELS = settings(settings.get_profile("kernels"), max_examples=60)
BATCH = st.sampled_from([1, 2, 3, 4, 7, 8, 9, 16, 17, 64])
WIDTH = st.one_of(st.integers(1, 200), st.sampled_from([16, 64, 128, 256, 1000]))
SIMD = st.booleans()


@KERNELS
@given(batch=BATCH, n=st.integers(1, 40), m=WIDTH, paths=st.integers(1, 4), simd=SIMD,
       bias=st.booleans(), seed=st.integers(0, 2**16))
def test_binary_linear(cpu_ops, make, batch, n, m, paths, simd, bias, seed):
    signs, alpha, w = make.binary(n, m, paths, seed)
    x = torch.randn(batch, m, generator=make.generator(seed + 1))
    b = torch.randn(n, generator=make.generator(seed + 2)) if bias else None
    y = cpu.binary_linear(x, signs, alpha, b, simd=simd)
    make.assert_linear_close(y, x, w, reference.binary_linear(x, signs, alpha, b))


@KERNELS
@given(batch=BATCH, n=st.integers(1, 40), m=WIDTH, group=st.sampled_from([4, 8, 64, 128, 512]),
       offset=st.booleans(), simd=SIMD, seed=st.integers(0, 2**16))
def test_int2_linear(cpu_ops, make, batch, n, m, group, offset, simd, seed):
    codes, scale, off, w = make.int2(n, m, group, seed, with_offset=offset)
    x = torch.randn(batch, m, generator=make.generator(seed + 1))
    y = cpu.int2_linear(x, codes, scale, off, group, None, simd=simd)
    make.assert_linear_close(y, x, w, reference.int2_linear(x, codes, scale, off, group, None))


@KERNELS
@given(batch=BATCH, n=st.integers(1, 40), m=WIDTH, group=st.sampled_from([None, 4, 64, 192]),
       simd=SIMD, seed=st.integers(0, 2**16))
def test_vq_linear(cpu_ops, make, batch, n, m, group, simd, seed):
    codes, codebook, scale, w = make.vq(n, m, group, seed)
    x = torch.randn(batch, m, generator=make.generator(seed + 1))
    y = cpu.vq_linear(x, codes, codebook, scale, group, None, simd=simd)
    ref = reference.vq_linear(x, codes, codebook, scale, group, None)
    make.assert_linear_close(y, x, w, ref)


@pytest.mark.parametrize("batch", [1, 3, 9])
def test_linear_large_enough_for_every_thread(cpu_ops, make, batch):
    """Row groups split over threads, a ragged last group and a masked last column chunk."""
    n, m = 333, 1800
    x = torch.randn(batch, m, generator=make.generator(7))
    for paths in (2, 3):
        signs, alpha, w = make.binary(n, m, paths, seed=paths)
        make.assert_linear_close(cpu.binary_linear(x, signs, alpha, None), x, w,
                                 reference.binary_linear(x, signs, alpha, None))
    for group in (None, 64):
        codes, codebook, scale, w = make.vq(n, m, group, seed=9)
        make.assert_linear_close(cpu.vq_linear(x, codes, codebook, scale, group, None), x, w,
                                 reference.vq_linear(x, codes, codebook, scale, group, None))


def test_linear_with_tables_shared_by_the_threads(cpu_ops, make):
    """Tables over 4 MiB are built once by the team instead of per thread."""
    n, m = 40, 4100  # 64 batch rows x 1152 quads x 16 floats of sign tables
    x = torch.randn(64, m, generator=make.generator(8))
    signs, alpha, w = make.binary(n, m, 2, seed=4)
    make.assert_linear_close(cpu.binary_linear(x, signs, alpha, None), x, w,
                             reference.binary_linear(x, signs, alpha, None))
    n, m = 20, 16500  # 4160 quads x 256 codes of VQ tables, per batch row
    x = torch.randn(2, m, generator=make.generator(9))
    codes, codebook, scale, w = make.vq(n, m, 64, seed=5)
    make.assert_linear_close(cpu.vq_linear(x, codes, codebook, scale, 64, None), x, w,
                             reference.vq_linear(x, codes, codebook, scale, 64, None))


def test_linear_edge_values(cpu_ops, make):
    """Zero scales, zero activations, a single column and huge magnitudes stay exact."""
    codes, scale, offset, _ = make.int2(5, 130, 64, seed=3)
    x = torch.zeros(2, 130)
    assert torch.equal(cpu.int2_linear(x, codes, scale, offset, 64, None), torch.zeros(2, 5))
    zero = torch.zeros_like(scale)
    x = torch.randn(3, 130, generator=make.generator(4)) * 1e6
    y = cpu.int2_linear(x, codes, zero, None, 64, None)
    assert torch.equal(y, torch.zeros(3, 5))
    signs, alpha, w = make.binary(1, 1, 1, seed=5)
    x = torch.tensor([[2.5]])
    torch.testing.assert_close(cpu.binary_linear(x, signs, alpha, None), x @ w.T)


@KERNELS
@given(batch=st.integers(1, 3), n=st.integers(1, 40), m=st.integers(1, 300),
       eps=st.sampled_from([0.5, 0.05, 0.01]), dtype=st.sampled_from([torch.float32,
                                                                        torch.float64]),
       seed=st.integers(0, 1000))
@example(batch=1, n=1, m=171, eps=0.5, dtype=torch.float32, seed=0)  # failed CI with a fixed atol
@example(batch=2, n=3, m=1, eps=0.5, dtype=torch.float32, seed=0)  # g ~ 0 beside f ~ 1
def test_sinkhorn_follows_the_reference_iteration(cpu_ops, batch, n, m, eps, dtype, seed):
    rng = np.random.default_rng(seed)
    cost = torch.tensor(rng.random((batch, n, m)), dtype=dtype)
    a = torch.tensor(rng.random((batch, n)) + 0.1, dtype=dtype)
    b = torch.tensor(rng.random((batch, m)) + 0.1, dtype=dtype)
    a, b = a / a.sum(-1, keepdim=True), b / b.sum(-1, keepdim=True)
    b[:, 0] += a.sum(-1) - b.sum(-1)  # equal totals in this dtype
    # tol = 0: both run exactly 40 iterations, so they must agree to rounding
    got = cpu.sinkhorn(cost, a, b, eps, 40, 0.0, 10)
    ref = reference.sinkhorn(cost, a, b, eps, 40, 0.0, 10)
    assert got.n_iter == ref.n_iter == 40
    for field in ("plan", "cost", "f", "g", "error"):
        expected = getattr(ref, field)
        # float32 rounding grows with the largest value a field is computed from (a potential near
        # zero beside potentials of order 1 carries their absolute rounding, not its own relative)
        scale = float(expected.abs().max()) if expected.numel() else 1.0
        if field in ("f", "g"):  # the potentials are computed from each other: g of a single
            scale = max(float(ref.f.abs().max()), float(ref.g.abs().max()))  # column is ~0
        tol = {"rtol": 1e-4, "atol": max(1e-6, 2e-5 * scale)} if dtype == torch.float32 else {}
        torch.testing.assert_close(getattr(got, field), expected, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sinkhorn_large_enough_for_every_thread(cpu_ops, dtype):
    rng = np.random.default_rng(1)
    cost = torch.tensor(rng.random((3, 130, 301)), dtype=dtype)
    a = torch.full((3, 130), 1 / 130, dtype=dtype)
    b = torch.full((3, 301), 1 / 301, dtype=dtype)
    got = cpu.sinkhorn(cost, a, b, 0.02, 30, 0.0, 10)
    ref = reference.sinkhorn(cost, a, b, 0.02, 30, 0.0, 10)
    tol = {"rtol": 1e-4, "atol": 1e-7} if dtype == torch.float32 else {}
    torch.testing.assert_close(got.plan, ref.plan, **tol)
    torch.testing.assert_close(got.f, ref.f, **tol)


def test_sinkhorn_converges_and_is_stable_at_small_epsilon(cpu_ops):
    rng = np.random.default_rng(0)
    cost = torch.tensor(rng.random((4, 30, 20)), dtype=torch.float32)
    a = torch.full((4, 30), 1 / 30)
    b = torch.full((4, 20), 1 / 20)
    out = cpu.sinkhorn(cost, a, b, 1e-3, 5000, 1e-4, 10)
    assert torch.isfinite(out.plan).all() and (out.error < 1e-4).all()
    assert out.n_iter < 5000
    torch.testing.assert_close(out.plan.sum(-2), b)


def test_sinkhorn_with_empty_rows_in_the_marginal(cpu_ops):
    cost = torch.rand(1, 5, 4, generator=torch.Generator().manual_seed(0))
    a = torch.tensor([[0.5, 0.0, 0.25, 0.25, 0.0]])
    b = torch.full((1, 4), 0.25)
    got = cpu.sinkhorn(cost, a, b, 0.05, 500, 1e-7, 10)
    ref = reference.sinkhorn(cost, a, b, 0.05, 500, 1e-7, 10)
    assert torch.equal(got.plan[0, 1], torch.zeros(4)) and torch.isfinite(got.plan).all()
    torch.testing.assert_close(got.plan, ref.plan)


def _assert_same_contraction(got, ref):
    for field in got._fields:
        g, r = getattr(got, field), getattr(ref, field)
        if g.dtype == torch.float64:
            torch.testing.assert_close(g, r, rtol=1e-12, atol=1e-9)
        else:
            assert torch.equal(g, r), field


@KERNELS
@given(shape=st.one_of(st.lists(st.integers(1, 9), min_size=2, max_size=2),
                       st.lists(st.integers(1, 9), min_size=3, max_size=3)),
       threshold=st.sampled_from([0.0, 0.2, 0.25, 0.5, 0.8, 2.0]), seed=st.integers(0, 1000))
def test_grid_contract(cpu_ops, make, shape, threshold, seed):
    g = make.generator(seed)
    image = torch.rand(shape, generator=g)
    # quarter steps make weights equal to the threshold: those edges must stay cut
    weights = torch.randint(0, 4, (len(shape), *shape), generator=g).float() / 4
    with make.forced("cpu"):
        got = ops.grid_contract(image, weights, threshold)
    with make.forced("reference"):
        ref = ops.grid_contract(image, weights, threshold)
    _assert_same_contraction(got, ref)


@pytest.mark.parametrize("threshold", [0.2, 0.5])
def test_grid_contract_64_cubed(cpu_ops, make, threshold):
    g = make.generator(7)
    image = torch.rand(64, 64, 64, generator=g)
    weights = torch.rand(3, 64, 64, 64, generator=g)
    got = cpu.grid_contract(image, weights, threshold)
    _assert_same_contraction(got, reference.grid_contract(image, weights, threshold))
    assert got.region_count.sum() == 64**3


def test_grid_contract_2d_in_row_slabs(cpu_ops, make):
    g = make.generator(8)
    image = torch.rand(370, 361, generator=g)  # > 2 x 65536 pixels: two row slabs
    weights = torch.rand(2, 370, 361, generator=g)
    with make.forced("cpu"):
        got = ops.grid_contract(image, weights, 0.4)
    with make.forced("reference"):
        ref = ops.grid_contract(image, weights, 0.4)
    _assert_same_contraction(got, ref)


def test_grid_contract_extremes(cpu_ops):
    image = torch.rand(3, 4, 5)
    nothing = cpu.grid_contract(image, torch.ones(3, 3, 4, 5), 0.5)
    assert torch.equal(nothing.labels.flatten(), torch.arange(60))
    everything = cpu.grid_contract(image, torch.zeros(3, 3, 4, 5), 0.5)
    assert everything.labels.max() == 0 and everything.edges.shape == (0, 2)
    nan = cpu.grid_contract(image, torch.full((3, 3, 4, 5), float("nan")), 0.5)
    assert nan.labels.max() == 59  # NaN weights never merge
