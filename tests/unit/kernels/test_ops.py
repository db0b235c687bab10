"""The public API: dispatch, forcing, fallback, validation and shape handling."""

from __future__ import annotations

import logging

import pytest
import torch
from paperworks.kernels import backends, cpu, ops, packing, reference
from paperworks.kernels.cpu import build

ALL_OPS = ("binary_linear", "int2_linear", "vq_linear", "sinkhorn", "grid_contract")


def test_cpu_tensors_run_on_the_cpu_backend(cpu_ops, monkeypatch):
    monkeypatch.delenv(backends.ENV, raising=False)
    for op in ALL_OPS:
        assert ops.backend_for(op, "cpu") == "cpu"


def test_environment_variable_forces_a_backend(cpu_ops, monkeypatch):
    monkeypatch.setenv(backends.ENV, "reference")
    assert ops.backend_for("int2_linear") == "reference"
    monkeypatch.setenv(backends.ENV, " CPU ")
    assert ops.backend_for("int2_linear") == "cpu"
    monkeypatch.setenv(backends.ENV, "cuda")  # cannot run on CPU tensors: reference
    assert ops.backend_for("int2_linear", "cpu") == "reference"
    monkeypatch.setenv(backends.ENV, "fpga")
    with pytest.raises(ValueError, match="fpga"):
        ops.backend_for("int2_linear")


def test_unbuildable_cpu_backend_falls_back_to_the_reference(monkeypatch, caplog, make):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with caplog.at_level(logging.WARNING):
        assert build._build() is None
    assert "no C++ compiler" in caplog.text
    monkeypatch.setattr(cpu, "load", lambda: None)
    monkeypatch.delenv(backends.ENV, raising=False)
    backends._fall_back.cache_clear()
    with caplog.at_level(logging.WARNING):
        assert ops.backend_for("binary_linear") == "reference"
    assert "using the reference" in caplog.text
    signs, alpha, w = make.binary(3, 20, 2, seed=0)
    x = torch.randn(2, 20)
    make.assert_linear_close(ops.binary_linear(x, signs, alpha), x, w, x @ w.T)


def test_a_required_backend_that_cannot_load_is_an_error_not_a_fallback(monkeypatch):
    """Images set PAPERWORKS_KERNELS_REQUIRED: a broken build fails loudly; an op a backend does
    not implement on that device (grid_contract has no CUDA kernel) still runs on the reference."""
    monkeypatch.setattr(cpu, "load", lambda: None)
    monkeypatch.delenv(backends.ENV, raising=False)
    monkeypatch.setenv(backends.REQUIRED_ENV, "1")
    with pytest.raises(backends.KernelUnavailable, match="binary_linear.*cpu not available"):
        ops.backend_for("binary_linear", "cpu")
    assert backends.report(["grid_contract"], "meta") == {"grid_contract": "reference"}
    monkeypatch.setenv(backends.REQUIRED_ENV, "0")
    assert backends.report(["binary_linear"], "cpu") == {"binary_linear": "reference"}


def test_the_report_names_each_ops_backend(cpu_ops, monkeypatch):
    monkeypatch.delenv(backends.ENV, raising=False)
    assert backends.report(ALL_OPS, "cpu") == dict.fromkeys(ALL_OPS, "cpu")


def test_linear_keeps_leading_dims_and_dtype(cpu_ops, make):
    codes, scale, offset, w = make.int2(6, 40, 8, seed=1)
    x = torch.randn(2, 3, 40, generator=make.generator(2)).to(torch.bfloat16)
    y = ops.int2_linear(x, codes, scale, offset, group_size=8)
    assert y.shape == (2, 3, 6) and y.dtype == torch.bfloat16
    ref = reference.int2_linear(x.float().reshape(6, 40), codes, scale, offset, 8, None)
    torch.testing.assert_close(y.float().reshape(6, 6), ref, rtol=1e-2, atol=1e-2)
    assert ops.int2_linear(x[:, :0], codes, scale, offset, group_size=8).shape == (2, 0, 6)


def test_linear_validation(make):
    signs, alpha, _ = make.binary(4, 20, 2, seed=0)
    x = torch.randn(3, 20)
    with pytest.raises(ValueError, match="signs"):
        ops.binary_linear(torch.randn(3, 30), signs, alpha)
    with pytest.raises(ValueError, match="alpha"):
        ops.binary_linear(x, signs, alpha[:1])
    with pytest.raises(TypeError, match="uint8"):
        ops.binary_linear(x, signs.int(), alpha)
    with pytest.raises(TypeError, match="floating"):
        ops.binary_linear(x.int(), signs, alpha)
    codes, scale, offset, _ = make.int2(4, 20, 8, seed=0)
    with pytest.raises(ValueError, match="scale"):
        ops.int2_linear(x, codes, scale, offset, group_size=4)
    with pytest.raises(ValueError, match="multiple of 4"):
        ops.int2_linear(x, codes, scale, offset, group_size=6)
    vcodes, codebook, vscale, _ = make.vq(4, 20, 8, seed=0)
    with pytest.raises(ValueError, match="group_size"):
        ops.vq_linear(x, vcodes, codebook, vscale)
    with pytest.raises(ValueError, match="codebook"):
        ops.vq_linear(x, vcodes, codebook[:16])


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("group", [None, 8, 12])
def test_lattice_linear_equals_vq_with_the_lattice_codebook(backend, group, make):
    g = make.generator(3)
    a, b = torch.randn(4, 4, generator=g), torch.randn(4, generator=g)
    codebook = packing.lattice_codebook(a, b)
    w = make.weights(7, 45, seed=4)
    codes = packing.vq_encode(w, codebook)
    scale = None if group is None else torch.rand(7, packing.num_groups(45, group)) + 0.5
    x = torch.randn(5, 45, generator=g)
    bias = torch.randn(7, generator=g)
    with make.forced(backend):
        y = ops.lattice_linear(x, codes, a, b, scale, group_size=group, bias=bias)
        want = ops.vq_linear(x, codes, codebook, scale, group_size=group, bias=bias)
    dense = packing.dequantize_vq(codes, codebook, 45, scale, group)
    make.assert_linear_close(y, x, dense, want)


def test_sinkhorn_api_defaults_and_unbatched_input(cpu_ops):
    cost = torch.rand(6, 9, generator=torch.Generator().manual_seed(0))
    out = ops.sinkhorn(cost, epsilon=0.1, tol=1e-7)
    assert out.plan.shape == (6, 9) and out.f.shape == (6,) and out.cost.shape == ()
    torch.testing.assert_close(out.plan.sum(0), torch.full((9,), 1 / 9))
    torch.testing.assert_close(out.plan.sum(1), torch.full((6,), 1 / 6), atol=1e-6, rtol=0)
    assert out.plan.dtype == torch.float32
    batched = ops.sinkhorn(cost[None].double().expand(2, 6, 9), epsilon=0.1)
    assert batched.plan.dtype == torch.float64 and batched.plan.shape == (2, 6, 9)


def test_sinkhorn_validation():
    cost = torch.rand(2, 3, 4)
    with pytest.raises(ValueError, match="totals"):
        ops.sinkhorn(cost, torch.ones(2, 3), torch.ones(2, 4))
    with pytest.raises(ValueError, match="non-negative"):
        ops.sinkhorn(cost, torch.tensor([1.5, -0.5, 0.0]).expand(2, 3))
    with pytest.raises(ValueError, match="finite"):
        ops.sinkhorn(torch.full((3, 4), float("inf")))
    with pytest.raises(ValueError, match="epsilon"):
        ops.sinkhorn(cost, epsilon=0.0)


def test_grid_contract_2d_matches_3d_with_one_plane(make):
    g = make.generator(5)
    image = torch.rand(6, 7, generator=g)
    weights = torch.rand(2, 6, 7, generator=g)
    flat = ops.grid_contract(image, weights, 0.5)
    assert flat.labels.shape == (6, 7)
    with make.forced("reference"):
        as_3d = ops.grid_contract(image[None], torch.cat([torch.ones(1, 1, 6, 7),
                                                          weights[:, None]]), 0.5)
    assert torch.equal(flat.labels, as_3d.labels[0])
    assert torch.equal(flat.edges, as_3d.edges)


def test_grid_contract_validation():
    with pytest.raises(ValueError, match="weights"):
        ops.grid_contract(torch.rand(4, 5), torch.rand(3, 4, 5), 0.5)
    with pytest.raises(ValueError, match="non-empty"):
        ops.grid_contract(torch.rand(0, 5), torch.rand(2, 0, 5), 0.5)
