"""Bits per weight, per method: the 2-bit codes alone and with every tensor stored beside them
(scales, RaBiT's float g / h vectors, LC-QAT's A, b and rotation signs), counted from a packed
model's tensors and from the per-method formula, which agree; the job reports both."""
from __future__ import annotations

import pytest
import torch
from paperworks.services.quantizer import checkpoint, methods, quantize
from paperworks.services.quantizer.distill import TokenData
from paperworks.services.quantizer.linears import find_linears, get_module
from paperworks.services.quantizer.method_names import NAMES
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder

SMALL = dict(steps=0, batch=2, seq_len=16, calib_windows=4, block_steps=0, init_sweeps=2)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return TinyDecoder(TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=32)).eval()


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    return TokenData.from_ids(torch.randint(0, 256, (4000,), generator=gen).tolist())


@pytest.mark.parametrize("method", NAMES)
def test_counted_bits_equal_the_formula_and_the_manifest(tiny, data, method):
    student, _ = quantize.quantize(tiny, data, quantize.QuantConfig(method=method, **SMALL))
    packed = quantize.pack(student)
    shapes = [tuple(get_module(tiny, n).weight.shape) for n in find_linears(tiny)]
    counted = checkpoint.bits_per_weight(packed)
    expected = methods.bits_per_weight(method, shapes)
    assert counted["codes"] == expected["codes"] == 2.0
    assert counted["weights"] == sum(n * m for n, m in shapes)
    assert counted["parts"] == pytest.approx(expected["parts"])
    assert counted["with_scales"] == pytest.approx(expected["with_scales"])
    _, manifest = checkpoint.save(packed, method, {"kind": "tiny"})
    assert manifest["bits_per_weight_with_scales"] == pytest.approx(counted["with_scales"])


def test_the_side_tensors_each_method_pays_for():
    big = [(4096, 4096)]
    rabit = methods.bits_per_weight("rabit", big)
    assert set(rabit["parts"]) == {"g", "h"}
    assert rabit["with_scales"] == pytest.approx(2 + 64 * 8192 / 4096**2)  # g (2, N), h (2, M) fp32
    assert set(methods.bits_per_weight("lcqat", big)["parts"]) == {"scale", "in_scale", "a", "b", "in_signs",
                                                                  "out_signs"}
    # scalar 2-bit with a float32 scale and offset per group of 64 stores 3 bits per weight at any size
    assert methods.bits_per_weight("scalar_qat", big)["with_scales"] == 3.0
    assert methods.bits_per_weight("rtn", [(64, 32)])["with_scales"] == 4.0  # one group of 32
    # the float vectors weigh heavily on small layers: RaBiT at 4 bits per weight for a 64 x 64 layer
    assert methods.bits_per_weight("rabit", [(64, 64)])["with_scales"] == 4.0
