"""Triton kernels against the reference; on a CPU host through the interpreter (slow, so
few examples and small shapes)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from paperworks.kernels import backends, ops, reference
from paperworks.kernels import triton as triton_backend

pytest.importorskip("triton", reason="triton is not installed (pip install triton)")
if not triton_backend.available():
    pytest.skip("triton needs a GPU or TRITON_INTERPRET=1", allow_module_level=True)

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
KERNELS = settings(settings.get_profile("kernels"), max_examples=15)
SHAPES = dict(batch=st.sampled_from([1, 3, 17]), n=st.integers(1, 40),
              m=st.sampled_from([1, 5, 64, 130]), seed=st.integers(0, 1000))


def _on(*tensors):
    return [t if t is None else t.to(DEVICE) for t in tensors]


def test_triton_is_selected_when_forced(make):
    with make.forced("triton"):
        assert backends.select("int2_linear", DEVICE).NAME == "triton"
        assert backends.select("sinkhorn", DEVICE).NAME == "reference"  # not a triton op


@KERNELS
@given(paths=st.integers(1, 3), **SHAPES)
def test_binary_linear(make, batch, n, m, paths, seed):
    signs, alpha, w = make.binary(n, m, paths, seed)
    x = torch.randn(batch, m, generator=make.generator(seed))
    bias = torch.randn(n, generator=make.generator(seed + 1))
    with make.forced("triton"):
        y = ops.binary_linear(*_on(x, signs, alpha, bias)).cpu()
    make.assert_linear_close(y, x, w, reference.binary_linear(x, signs, alpha, bias))


@KERNELS
@given(group=st.sampled_from([4, 32, 128]), offset=st.booleans(), **SHAPES)
def test_int2_linear(make, batch, n, m, group, offset, seed):
    codes, scale, off, w = make.int2(n, m, group, seed, with_offset=offset)
    x = torch.randn(batch, m, generator=make.generator(seed))
    with make.forced("triton"):
        y = ops.int2_linear(*_on(x, codes, scale, off), group_size=group).cpu()
    make.assert_linear_close(y, x, w, reference.int2_linear(x, codes, scale, off, group, None))


@KERNELS
@given(group=st.sampled_from([None, 8, 64]), **SHAPES)
def test_vq_linear(make, batch, n, m, group, seed):
    codes, codebook, scale, w = make.vq(n, m, group, seed)
    x = torch.randn(batch, m, generator=make.generator(seed))
    with make.forced("triton"):
        y = ops.vq_linear(*_on(x, codes, codebook, scale), group_size=group).cpu()
    make.assert_linear_close(y, x, w,
                             reference.vq_linear(x, codes, codebook, scale, group, None))
