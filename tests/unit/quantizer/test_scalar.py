"""Scalar 2-bit baselines: step 0 is min-max RTN, and the packed form runs the same function."""
from __future__ import annotations

import torch
from paperworks.kernels import packing
from paperworks.services.quantizer import scalar


def test_step_zero_is_round_to_nearest_and_packs_exactly():
    gen = torch.Generator().manual_seed(0)
    w, x, bias = torch.randn(12, 64, generator=gen), torch.randn(5, 64, generator=gen), torch.randn(12)
    layer = scalar.ScalarQATLinear(w, bias, group_size=32)
    codes, s, o = packing.quantize_int2(w, 32)
    torch.testing.assert_close(layer.quantized_weight(), packing.dequantize_int2(codes, s, o, 32, 64))
    packed = layer.packed()
    assert torch.equal(packed.codes, codes)
    with torch.no_grad():
        torch.testing.assert_close(packed(x), layer(x), atol=1e-5, rtol=1e-5)


def test_straight_through_gradient_reaches_latent_scale_and_offset():
    layer = scalar.ScalarQATLinear(torch.randn(8, 32), None, group_size=16)
    layer(torch.randn(4, 32)).pow(2).sum().backward()
    assert all(p.grad.abs().sum() > 0 for p in (layer.weight, layer.scale, layer.offset))
