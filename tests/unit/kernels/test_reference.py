"""The reference against independent oracles: dense algebra, POT, a plain union-find."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from paperworks.kernels import reference

KERNELS = settings(settings.get_profile("kernels"))
ot = pytest.importorskip("ot", reason="POT (pip install pot) is the Sinkhorn oracle")


def test_binary_linear_is_the_sum_of_scaled_sign_products(make):
    signs, alpha, w = make.binary(9, 45, 3, seed=0)
    x = torch.randn(4, 45, generator=make.generator(1))
    bias = torch.randn(9, generator=make.generator(2))
    make.assert_linear_close(reference.binary_linear(x, signs, alpha, bias), x, w,
                             x @ w.T + bias)


def _marginals(rng, batch, n, m, dtype):
    a = torch.tensor(rng.random((batch, n)) + 0.05, dtype=dtype)
    b = torch.tensor(rng.random((batch, m)) + 0.05, dtype=dtype)
    return a / a.sum(-1, keepdim=True), b / b.sum(-1, keepdim=True)


@KERNELS
@given(batch=st.integers(1, 3), n=st.integers(1, 12), m=st.integers(1, 12),
       eps=st.sampled_from([0.5, 0.1, 0.03]), seed=st.integers(0, 1000))
def test_sinkhorn_matches_pot(batch, n, m, eps, seed):
    rng = np.random.default_rng(seed)
    cost = torch.tensor(rng.random((batch, n, m)), dtype=torch.float64)
    a, b = _marginals(rng, batch, n, m, torch.float64)
    out = reference.sinkhorn(cost, a, b, eps, 5000, 1e-12, 10)
    for k in range(batch):
        plan = ot.bregman.sinkhorn_log(a[k].numpy(), b[k].numpy(), cost[k].numpy(), eps,
                               numItermax=5000, stopThr=1e-13)
        np.testing.assert_allclose(out.plan[k].numpy(), plan, rtol=1e-6, atol=1e-9)
        assert out.cost[k].item() == pytest.approx(float((plan * cost[k].numpy()).sum()),
                                                   rel=1e-6)
    torch.testing.assert_close(out.plan.sum(-2), b)
    assert (out.error < 1e-9).all()
    # the potentials reproduce the plan
    torch.testing.assert_close(
        torch.exp((out.f[:, :, None] + out.g[:, None, :] - cost) / eps), out.plan)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sinkhorn_is_stable_at_small_epsilon(dtype):
    rng = np.random.default_rng(3)
    n = m = 6
    cost = torch.tensor(rng.random((2, n, m)), dtype=dtype)
    a, b = _marginals(rng, 2, n, m, dtype)
    out = reference.sinkhorn(cost, a, b, 1e-3, 3000, 1e-5, 10)
    assert torch.isfinite(out.plan).all() and torch.isfinite(out.f).all()
    assert (out.error < 1e-3).all()
    for k in range(2):  # at eps -> 0 the entropic cost approaches the exact OT cost
        exact = ot.emd2(a[k].double().numpy(), b[k].double().numpy(), cost[k].double().numpy())
        assert out.cost[k].item() == pytest.approx(exact, abs=2e-2)


def _union_find_labels(shape, weights, threshold):
    """Labels by a textbook union-find over the grid, numbered by first voxel."""
    n = int(np.prod(shape))
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    index = np.arange(n).reshape(shape)
    for axis in range(len(shape)):
        src = np.take(index, range(shape[axis] - 1), axis=axis).ravel()
        dst = np.take(index, range(1, shape[axis]), axis=axis).ravel()
        w = np.take(weights[axis], range(shape[axis] - 1), axis=axis).ravel()
        for i, j, wt in zip(src, dst, w, strict=True):
            if wt < threshold:
                ri, rj = find(i), find(j)
                parent[max(ri, rj)] = min(ri, rj)
    roots = [find(i) for i in range(n)]
    numbering = {}
    return np.array([numbering.setdefault(r, len(numbering)) for r in roots]).reshape(shape)


@KERNELS
@given(shape=st.lists(st.integers(1, 5), min_size=3, max_size=3),
       threshold=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.01]), seed=st.integers(0, 1000))
def test_grid_contract_matches_a_plain_union_find(shape, threshold, seed):
    rng = np.random.default_rng(seed)
    image = torch.tensor(rng.random(shape), dtype=torch.float32)
    weights = torch.tensor(rng.integers(0, 4, (3, *shape)) / 4, dtype=torch.float32)
    out = reference.grid_contract(image, weights, threshold)
    labels = _union_find_labels(tuple(shape), weights.numpy(), threshold)
    np.testing.assert_array_equal(out.labels.numpy(), labels)
    regions = labels.max() + 1
    np.testing.assert_array_equal(out.region_count.numpy(), np.bincount(labels.ravel()))
    np.testing.assert_allclose(out.region_sum.numpy(), np.bincount(
        labels.ravel(), image.numpy().ravel().astype(np.float64), minlength=regions))
    np.testing.assert_allclose(out.region_sq_sum.numpy(), np.bincount(
        labels.ravel(), image.numpy().ravel().astype(np.float64) ** 2, minlength=regions))
    pairs = {}
    for axis in range(3):
        size = shape[axis]
        la = np.take(labels, range(size - 1), axis=axis).ravel()
        lb = np.take(labels, range(1, size), axis=axis).ravel()
        w = np.take(weights.numpy()[axis], range(size - 1), axis=axis).ravel()
        for p, q, wt in zip(la, lb, w, strict=True):
            if p != q:
                key = (min(p, q), max(p, q))
                count, total = pairs.get(key, (0, 0.0))
                pairs[key] = (count + 1, total + float(wt))
    keys = sorted(pairs)
    assert out.edges.tolist() == [list(k) for k in keys]
    assert out.edge_count.tolist() == [pairs[k][0] for k in keys]
    np.testing.assert_allclose(out.edge_weight_sum.numpy(), [pairs[k][1] for k in keys])
