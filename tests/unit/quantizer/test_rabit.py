"""RaBiT layers: the coupled derivation of path 2, the function-aware init, and the packed form."""
from __future__ import annotations

import torch
from paperworks.services.quantizer import rabit


def _data(n=24, m=32, tokens=256, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, m, generator=gen) * 0.05
    x = torch.randn(tokens, m, generator=gen) * torch.linspace(0.1, 3.0, m)  # unequal channels
    return w, x


def _function_error(w, w_hat, x):
    return float((x @ (w - w_hat).T).norm() / (x @ w.T).norm())


def test_svid_init_fits_the_layer_function_better_than_greedy_residual_binarization():
    w, x = _data()
    svid = rabit.RaBiTLinear(w, None, *rabit.svid_init(w, x))
    greedy = rabit.RaBiTLinear(w, None, *rabit.greedy_init(w))
    w_svid, w_greedy = (sum(layer.path_weights()) for layer in (svid, greedy))
    assert _function_error(w, w_svid, x) < 0.9 * _function_error(w, w_greedy, x)


def test_path_two_binarizes_path_one_residual_of_the_one_latent():
    w, x = _data(seed=1)
    layer = rabit.RaBiTLinear(w, None, *rabit.svid_init(w, x))
    p1, p2 = layer.path_weights()
    signs = layer.signs()
    assert torch.equal(signs[0], rabit.sign(w))
    assert torch.equal(signs[1], rabit.sign(w - p1))
    with torch.no_grad():
        layer.weight.mul_(-1)  # moving the latent moves both paths
    assert torch.equal(layer.signs()[1], rabit.sign(-w - layer.path_weights()[0]))


def test_gradients_reach_the_latent_and_both_magnitudes_through_the_sign():
    w, x = _data(seed=2)
    layer = rabit.RaBiTLinear(w, None, *rabit.svid_init(w, x))
    layer(x).pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in (layer.weight, layer.g, layer.h))


def test_independent_baseline_starts_from_the_same_model_with_two_latents():
    w, x = _data(seed=3)
    coupled = rabit.make_layer(w, None, x, coupled=True)
    independent = rabit.make_layer(w, None, x, coupled=False)
    assert isinstance(independent, rabit.IndependentBinaryLinear)
    assert independent.latent.shape == (2, *w.shape)
    torch.testing.assert_close(independent(x), coupled(x))
    torch.testing.assert_close(independent.signs(), coupled.signs())


def test_packed_layer_matches_the_fake_quantized_layer_with_bias():
    w, x = _data(n=20, m=36, seed=4)  # 36 columns: a partial sign byte
    bias = torch.randn(20)
    layer = rabit.make_layer(w, bias, x)
    packed = rabit.PackedBinaryLinear.from_layer(layer)
    assert packed.signs.dtype == torch.uint8 and packed.signs.shape == (2, 20, 5)
    with torch.no_grad():
        torch.testing.assert_close(packed(x[:7]), layer(x[:7]), atol=1e-5, rtol=1e-5)
    for a, b in zip(packed.path_weights(), layer.path_weights(), strict=True):
        torch.testing.assert_close(a, b)
    again = rabit.PackedBinaryLinear.from_tensors(packed.tensors())
    torch.testing.assert_close(again(x[:3]), packed(x[:3]))


def test_svid_gauss_seidel_runs_to_its_fixed_point_and_fits_better_than_one_sweep():
    w, x = _data(seed=5)
    s = rabit.channel_importance(x, w.shape[1])

    def weighted_error(g, h):
        layer = rabit.RaBiTLinear(w, None, g, h)
        return float(((w - sum(layer.path_weights())) * s).norm())

    fixed = rabit.svid_init(w, x)
    for a, b in zip(fixed, rabit.svid_init(w, x, sweeps=500), strict=True):
        torch.testing.assert_close(a, b)  # more sweeps change nothing: the fixed point
    assert weighted_error(*fixed) < weighted_error(*rabit.svid_init(w, x, sweeps=1))
