"""LC-QAT layers: incoherence rotation, Hessian-aware PTQ, the exact QAT start, DGE, packing."""
from __future__ import annotations

import pytest
import torch
from paperworks.services.quantizer import lcqat


def _data(n=16, m=32, tokens=512, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, m, generator=gen) * 0.05
    mix = torch.randn(m, m, generator=gen) / m**0.5 + torch.eye(m)
    x = torch.randn(tokens, m, generator=gen) @ mix * torch.linspace(0.2, 2.0, m)  # correlated inputs
    return w, x


def _output_error(layer, w, x):
    with torch.no_grad():
        return float((layer(x) - x @ w.T).norm() / (x @ w.T).norm())


def test_rotation_is_orthogonal_and_inverted_exactly():
    rot = lcqat.Rotation(48, seed=3)  # blocks of 16
    x = torch.randn(5, 48)
    torch.testing.assert_close(rot.inverse(rot(x)), x, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rot(x).norm(dim=-1), x.norm(dim=-1))


def test_dge_rounds_forward_and_passes_the_power_surrogate_backward():
    v = torch.tensor([0.1, 0.4, 1.0, 2.75], requires_grad=True)
    out = lcqat.dge_round(v)
    assert out.tolist() == [0.0, 0.0, 1.0, 3.0]
    out.sum().backward()
    d = (2 * (v.detach() - v.detach().floor() - 0.5)).abs()
    expected = ((1 / lcqat.DGE_K) * d.pow(1 / lcqat.DGE_K - 1)).clamp_max(lcqat.DGE_MAX)
    torch.testing.assert_close(v.grad, expected)


def test_hessian_aware_rounding_beats_nearest_codeword_rounding():
    w, x = _data()
    gptq = lcqat.LCLinear(w, None, seed=0)
    gptq.ptq(x)
    nearest = lcqat.LCLinear(w, None, seed=0)
    with torch.no_grad():
        nearest.a.copy_(gptq.a)
        nearest.b.copy_(gptq.b)
        codebook = lcqat.GRID @ nearest.a.T + nearest.b
        blocks = nearest.target.reshape(-1, 4)
        nearest.codes = torch.cdist(blocks, codebook).argmin(1).reshape(16, 8).to(torch.uint8)
    assert _output_error(gptq, w, x) < 0.95 * _output_error(nearest, w, x)
    assert _output_error(gptq, w, x) < 0.6


def test_codebook_refit_minimises_the_output_error_for_the_chosen_codes():
    w, x = _data(seed=4)
    layer = lcqat.LCLinear(w, None, seed=4)
    layer.ptq(x)
    refit = _output_error(layer, w, x)
    with torch.no_grad():  # the unweighted weight-space least squares for the same codes
        z = layer.z().reshape(-1, 4)
        design = torch.cat([z, torch.ones(len(z), 1)], 1)
        sol = torch.linalg.lstsq(design, layer.target.reshape(-1, 4)).solution
        layer.a.copy_(sol[:4].T)
        layer.b.copy_(sol[4])
    assert refit < 0.98 * _output_error(layer, w, x), (refit, _output_error(layer, w, x))


def test_qat_starts_exactly_at_the_ptq_model_and_ends_on_its_codes():
    w, x = _data(seed=1)
    layer = lcqat.LCLinear(w, torch.randn(16), seed=1)
    layer.ptq(x)
    codes = layer.codes.clone()
    with torch.no_grad():
        before = layer(x)
        layer.start_qat()
        assert layer.mode == "qat"
        assert (layer(x) - before).abs().max() <= 1e-6
    layer.finish_qat()
    assert torch.equal(layer.codes, codes)


def test_qat_gradient_reaches_the_latent_and_the_affine_map():
    w, x = _data(seed=2)
    layer = lcqat.LCLinear(w, None, seed=2)
    layer.ptq(x)
    layer.start_qat()
    layer(x).pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in (layer.latent, layer.a, layer.b, layer.scale, layer.in_scale))


def test_packed_lattice_layer_matches_fake_quant_and_stores_two_bits_per_weight():
    w, x = _data(n=24, m=32, seed=3)
    layer = lcqat.LCLinear(w, torch.randn(24), seed=3)
    layer.ptq(x)
    packed = layer.packed()
    assert packed.codes.dtype == torch.uint8 and packed.codes.shape == (24, 8)  # 8 bits / 4 weights
    with torch.no_grad():
        torch.testing.assert_close(packed(x[:9]), layer(x[:9]), atol=1e-5, rtol=1e-5)
    again = lcqat.PackedLatticeLinear.from_tensors(packed.tensors())
    torch.testing.assert_close(again(x[:2]), packed(x[:2]))


def test_widths_not_divisible_by_four_are_refused():
    with pytest.raises(ValueError, match="divisible by 4"):
        lcqat.LCLinear(torch.randn(4, 10), None, seed=0)


@pytest.fixture(scope="module")
def tiny_ptq():
    """(teacher, its LC-QAT PTQ student before any fine-tuning, 32 calibration windows)."""
    from paperworks.services.quantizer import quantize
    from paperworks.services.quantizer.distill import TokenData
    from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder

    torch.manual_seed(0)
    teacher = TinyDecoder(TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=16)).eval()
    gen = torch.Generator().manual_seed(0)
    data = TokenData.from_ids(torch.randint(0, 256, (4000,), generator=gen).tolist())
    cfg = quantize.QuantConfig(method="lcqat", seq_len=16, calib_windows=32, block_steps=0)
    ptq, _ = quantize.build_student(teacher, data, cfg)
    return teacher, ptq, data.calib(16, 32, 0)


def _fixed_and_moved(ptq, fit, **moved_options):
    """Two copies of the PTQ student fitted by `fit`, codes fixed and latents at `moved_options`;
    checks what holds for both stages (fixed codes stay, moved ones change and are codes again)."""
    import copy

    fixed, moved = copy.deepcopy(ptq), copy.deepcopy(ptq)
    fixed_out, moved_out = fit(fixed), fit(moved, **moved_options)
    layers = [(m, f, p) for m, f, p in zip(moved.modules(), fixed.modules(), ptq.modules(), strict=True)
              if isinstance(m, lcqat.LCLinear)]
    assert all(torch.equal(f.codes, p.codes) for _, f, p in layers)  # latent_lr 0: codes fixed
    assert sum(int((m.codes != p.codes).sum()) for m, _, p in layers) > 0
    assert all(m.mode == "ptq" and m.latent is None for m, _, _ in layers)  # rounded back into codes
    return fixed, moved, fixed_out, moved_out


def test_block_reconstruction_with_code_latents_changes_codes_and_fits_the_block_better(tiny_ptq):
    teacher, ptq, calib = tiny_ptq
    _, _, err_fixed, err_moved = _fixed_and_moved(
        ptq, lambda m, **kw: lcqat.block_reconstruction(m, teacher, calib, steps=60, **kw), latent_lr=0.05)
    assert err_moved[0] < err_fixed[0], (err_moved, err_fixed)


def test_act_order_puts_every_code_back_in_its_column_block():
    # An exactly diagonal Hessian (orthogonal input columns) propagates no rounding error, so the
    # order of the blocks cannot matter: act-order must give the natural order's codes and A, b.
    n, m, tokens = 16, 32, 256
    w = torch.randn(n, m, generator=torch.Generator().manual_seed(5)) * 0.05
    q = torch.linalg.qr(torch.randn(tokens, m, generator=torch.Generator().manual_seed(6)))[0]
    xt = q * tokens**0.5 * torch.linspace(2.0, 0.2, m).roll(11)  # diag(H) not sorted by block
    natural, ordered = lcqat.LCLinear(w, None, seed=5), lcqat.LCLinear(w, None, seed=5)
    x = natural.rot_in.inverse(xt)
    natural.ptq(x, act_order=False)
    ordered.ptq(x, act_order=True)
    assert torch.equal(natural.codes, ordered.codes)
    torch.testing.assert_close(natural.a, ordered.a)
    torch.testing.assert_close(natural.b, ordered.b)


def test_end_to_end_fit_lowers_the_distillation_loss_and_ends_on_codes(tiny_ptq):
    from paperworks.services.quantizer.distill import distill_loss

    teacher, ptq, calib = tiny_ptq

    def loss(model):
        with torch.no_grad():
            return float(distill_loss(model, teacher, calib, 1.0)[0])

    fixed, moved, _, _ = _fixed_and_moved(
        ptq, lambda m, steps=40, **kw: lcqat.end_to_end(m, teacher, calib, steps=steps, **kw),
        steps=80, latent_lr=0.05)
    assert loss(fixed) < loss(ptq) and loss(moved) < loss(ptq), (loss(ptq), loss(fixed), loss(moved))
