"""The Beta CDF/PDF op (tables + device-side Hermite interpolation) against scipy, under
gradcheck, at the singular ends of sparse priors, and through the public API's dispatch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.kernels import backends, cpu, ops
from scipy import special, stats

# the sparse (a < 1) and peaked parameters DPSL's priors give, and a uniform
A = [0.5, 2.0, 0.125, 1.0, 0.05]
B = [1.5, 6.0, 0.875, 3.0, 4.05]


@pytest.fixture(scope="module")
def table():
    return ops.beta_table(A, B)


def _scipy(fn, x: torch.Tensor) -> np.ndarray:
    return np.stack([fn(x[:, k].numpy(), a, b) for k, (a, b) in enumerate(zip(A, B, strict=True))], 1)


def test_cdf_and_pdf_match_scipy(table):
    x = torch.rand(4000, len(A), dtype=torch.float64, generator=torch.Generator().manual_seed(0)) ** 3
    x[0], x[1] = 0.0, 1.0
    out = ops.beta_cdf_pdf(x, table)
    assert np.abs(out.cdf.numpy() - _scipy(stats.beta.cdf, x)).max() < 5e-4
    inner = (x > 1e-3).all(1) & (x < 1 - 1e-3).all(1)
    np.testing.assert_allclose(out.pdf[inner].numpy(), _scipy(stats.beta.pdf, x[inner]), rtol=2e-2, atol=1e-3)
    assert (out.cdf[0] == 0).all() and (out.cdf[1] == 1).all()


def test_gradcheck_and_the_pdf_is_the_gradient(table):
    x = torch.rand(6, len(A), dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 0.98 + 0.01
    x.requires_grad_()
    assert torch.autograd.gradcheck(lambda v: ops.beta_cdf_pdf(v, table).cdf, (x,))
    out = ops.beta_cdf_pdf(x, table)
    (grad,) = torch.autograd.grad(out.cdf.sum(), x)
    torch.testing.assert_close(grad, out.pdf)
    assert not out.pdf.requires_grad


def test_out_of_range_clamps_and_nan_stays_nan(table):
    x = torch.tensor([[-0.5] * 5, [1.5] * 5, [float("nan")] * 5], dtype=torch.float64)
    out = ops.beta_cdf_pdf(x, table)
    assert (out.cdf[0] == 0).all() and (out.cdf[1] == 1).all()
    assert (out.pdf[:2] == 0).all()
    assert out.cdf[2].isnan().all() and out.pdf[2].isnan().all()


def test_the_interpolant_is_monotone_and_bounded(table):
    x = torch.linspace(0, 1, 200_001, dtype=torch.float64)[:, None].expand(-1, len(A))
    out = ops.beta_cdf_pdf(x, table)
    assert (out.cdf.diff(dim=0) >= -1e-15).all()  # non-decreasing up to float64 rounding near 1
    assert (out.cdf >= 0).all() and (out.cdf <= 1).all()
    assert (out.pdf >= -1e-12).all()  # the derivative's f0/h - f1/h cancels to ~1e-13 where F ~ 1


def test_the_end_cells_follow_the_asymptotes_of_singular_pdfs():
    """Near 0 a sparse prior's CDF is ~ x^a: the relative error stays small down to 1e-12."""
    a, b = np.array([0.05, 0.125, 0.5]), np.array([4.05, 0.875, 0.3])
    tab = ops.beta_table(a, b)
    tiny = torch.tensor([1e-12, 1e-8, 1e-5, 1e-4], dtype=torch.float64)[:, None].expand(-1, 3)
    low = ops.beta_cdf_pdf(tiny, tab).cdf.numpy()
    np.testing.assert_allclose(low, special.betainc(a, b, tiny.numpy()), rtol=1e-3)
    high = 1 - ops.beta_cdf_pdf(1 - tiny, tab).cdf.numpy()  # 1 - F ~ (1 - x)^b near 1, b < 1
    np.testing.assert_allclose(high[1:, 1:], special.betainc(b, a, tiny.numpy())[1:, 1:], rtol=1e-3)


def test_dtypes_shapes_and_parameter_forms(table):
    x64 = torch.rand(2, 3, len(A), dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ref = ops.beta_cdf_pdf(x64, table)
    assert ref.cdf.shape == ref.pdf.shape == (2, 3, len(A))
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2)):
        out = ops.beta_cdf_pdf(x64.to(dtype), table)
        assert out.cdf.dtype == out.pdf.dtype == dtype
        torch.testing.assert_close(out.cdf.double(), ops.beta_cdf_pdf(x64.to(dtype).double(), table).cdf,
                                   atol=tol, rtol=tol)
    same = ops.beta_table(torch.tensor(A, dtype=torch.float64), np.array(B))
    assert all(torch.equal(u, v) for u, v in zip(same, table, strict=True))
    assert ops.beta_cdf_pdf(x64[:0, 0], table).cdf.shape == (0, len(A))


def test_validation(table):
    with pytest.raises(ValueError, match="positive"):
        ops.beta_table([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="positive"):
        ops.beta_table([1.0, float("inf")], [1.0, 1.0])
    with pytest.raises(ValueError, match="same length"):
        ops.beta_table([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="non-empty"):
        ops.beta_table([], [])
    with pytest.raises(ValueError, match="knots"):
        ops.beta_table([1.0], [1.0], knots=2)
    with pytest.raises(ValueError, match=r"x has shape \(4, 3\), expected \(\.\.\., 5\)"):
        ops.beta_cdf_pdf(torch.rand(4, 3), table)
    with pytest.raises(TypeError, match="floating point"):
        ops.beta_cdf_pdf(torch.ones(4, 5, dtype=torch.long), table)
    with pytest.raises(TypeError, match="BetaTable"):
        ops.beta_cdf_pdf(torch.rand(4, 5), (table.cdf, table.slope))


def test_the_op_runs_on_the_reference_everywhere(monkeypatch):
    """No compiled backend implements it: that is by design, so it is no error even where the images
    require compiled kernels (and no reason to build the CPU extension)."""
    monkeypatch.delenv(backends.ENV, raising=False)
    monkeypatch.setenv(backends.REQUIRED_ENV, "1")
    monkeypatch.setattr(cpu, "load", lambda: None)
    assert backends.report(["beta_cdf_pdf"], "cpu") == {"beta_cdf_pdf": "reference"}
    assert ops.backend_for("beta_cdf_pdf", "cuda") == "reference"
    monkeypatch.setenv(backends.ENV, "triton")
    assert ops.backend_for("beta_cdf_pdf", "cuda") == "reference"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu_without_a_host_sync(table):
    x = torch.rand(512, len(A), dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    on_gpu = table.to("cuda")
    xg = x.cuda().requires_grad_()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = ops.beta_cdf_pdf(xg, on_gpu)
        (grad,) = torch.autograd.grad(out.cdf.sum(), xg)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    ref = ops.beta_cdf_pdf(x, table)
    torch.testing.assert_close(out.cdf.cpu(), ref.cdf)
    torch.testing.assert_close(grad.cpu(), ref.pdf)
