"""Scalar 2-bit baselines: step 0 is min-max RTN, and the packed form runs the same function."""
from __future__ import annotations

import torch
from paperworks.kernels import packing
from paperworks.services.quantizer import baselines


def test_step_zero_is_round_to_nearest_and_packs_exactly():
    gen = torch.Generator().manual_seed(0)
    w, x, bias = torch.randn(12, 64, generator=gen), torch.randn(5, 64, generator=gen), torch.randn(12)
    layer = baselines.ScalarQATLinear(w, bias, group_size=32)
    codes, s, o = packing.quantize_int2(w, 32)
    torch.testing.assert_close(layer.quantized_weight(), packing.dequantize_int2(codes, s, o, 32, 64))
    packed = layer.packed()
    assert torch.equal(packed.codes, codes)
    with torch.no_grad():
        torch.testing.assert_close(packed(x), layer(x), atol=1e-5, rtol=1e-5)


def test_straight_through_rounds_but_the_clamp_keeps_its_gradient():
    gen = torch.Generator().manual_seed(1)
    layer = baselines.ScalarQATLinear(torch.randn(8, 32, generator=gen), None, group_size=16)
    with torch.no_grad():
        layer.log_gain.fill_(-0.5)  # shrink every scale: each group's largest weights leave the 4 levels
    layer(torch.randn(4, 32, generator=gen)).pow(2).sum().backward()
    u = layer._grouped()
    clamped = ((torch.round(u) < 0) | (torch.round(u) > 3)).reshape(layer.weight.shape)
    assert clamped.any() and (~clamped).any()
    # A clamped latent weight gets no gradient (it cannot drift off); the offset learns from it.
    assert (layer.weight.grad[clamped] == 0).all() and (layer.weight.grad[~clamped] != 0).all()
    assert (layer.log_gain.grad != 0).all() and (layer.offset.grad != 0).all()


def test_scale_stays_positive_and_is_rtn_at_step_zero():
    w = torch.randn(4, 32, generator=torch.Generator().manual_seed(2))
    layer = baselines.ScalarQATLinear(w, None, group_size=16)
    assert torch.equal(layer.scale, packing.quantize_int2(w, 16)[1])
    with torch.no_grad():
        layer.log_gain.fill_(-50.0)  # any step of the optimiser keeps it above zero
    assert (layer.scale > 0).all()
