"""Packed formats: exact round trips and the helpers that produce them."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from paperworks.kernels import packing

KERNELS = settings(settings.get_profile("kernels"))


@KERNELS
@given(n=st.integers(1, 5), m=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_sign_bits_round_trip(n, m, seed):
    w = torch.randn(n, m, generator=torch.Generator().manual_seed(seed))
    packed = packing.pack_signs(w)
    assert packed.dtype == torch.uint8 and packed.shape == (n, -(-m // 8))
    assert torch.equal(packing.unpack_signs(packed, m), torch.where(w >= 0, 1.0, -1.0))


def test_sign_bits_layout_is_lsb_first_with_zero_padding():
    w = torch.tensor([[1.0, -1, -1, 1, 0, -2, -3, -4, 5]])
    assert packing.pack_signs(w).tolist() == [[0b00011001, 0b00000001]]


@KERNELS
@given(n=st.integers(1, 5), m=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_int2_codes_round_trip(n, m, seed):
    q = torch.randint(0, 4, (n, m), generator=torch.Generator().manual_seed(seed))
    packed = packing.pack_int2(q)
    assert packed.shape == (n, -(-m // 4))
    assert torch.equal(packing.unpack_int2(packed, m), q.to(torch.uint8))


def test_int2_layout_and_range_check():
    assert packing.pack_int2(torch.tensor([[1, 2, 3, 0, 3]])).tolist() == [[0b00111001, 0b11]]
    with pytest.raises(ValueError):
        packing.pack_int2(torch.tensor([[4]]))


@KERNELS
@given(n=st.integers(1, 4), m=st.integers(1, 300), group=st.sampled_from([4, 12, 64, 128]))
def test_quantize_int2_is_within_half_a_step(n, m, group):
    w = torch.randn(n, m, generator=torch.Generator().manual_seed(m))
    codes, scale, offset = packing.quantize_int2(w, group)
    assert scale.shape == offset.shape == (n, packing.num_groups(m, group))
    back = packing.dequantize_int2(codes, scale, offset, group, m)
    step = scale.repeat_interleave(group, dim=1)[:, :m]
    assert ((back - w).abs() <= step / 2 + 1e-5).all()


def test_group_size_must_be_a_positive_multiple_of_four():
    for bad in (0, 3, -4, 6):
        with pytest.raises(ValueError):
            packing.num_groups(10, bad)


def test_residual_binarization_improves_with_paths():
    w = torch.randn(32, 256, generator=torch.Generator().manual_seed(0))
    errors = []
    for paths in (1, 2, 3):
        signs, alpha = packing.binarize_residual(w, paths)
        assert signs.shape == (paths, 32, 32) and alpha.shape == (paths, 32)
        errors.append((packing.dequantize_binary(signs, alpha, 256) - w).norm())
    assert errors[0] > errors[1] > errors[2]


def test_lattice_codebook_is_affine_in_the_packed_point():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 4, generator=g), torch.randn(4, generator=g)
    codebook = packing.lattice_codebook(a, b)
    z = torch.tensor([3, 0, 2, 1])
    code = int(packing.pack_int2(z[None])[0, 0])
    torch.testing.assert_close(codebook[code], a @ z.float() + b)


def test_vq_encode_picks_the_nearest_codeword():
    g = torch.Generator().manual_seed(2)
    codebook = torch.randn(256, 4, generator=g)
    chosen = torch.randint(0, 256, (3, 5), generator=g)
    w = codebook[chosen].reshape(3, 20)[:, :18]  # odd width: last block padded with zeros
    codes = packing.vq_encode(w, codebook)
    assert torch.equal(codes[:, :4], chosen[:, :4].to(torch.uint8))
    back = packing.dequantize_vq(codes[:, :4], codebook, 16)
    torch.testing.assert_close(back, w[:, :16])
