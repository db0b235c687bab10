"""The DPSL method code alone: DPSL ~ 0 on samples of its own prior (and not on others), the
per-modality form against a loop over subsets, the peers' formulas, upcycling's exactness,
Drop-Upcycling, the aux-free bias and the metrics. The Beta CDF/PDF op DPSL calls is the kernel
library's (tests/unit/kernels/test_beta.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.services.moe.dpsl import losses, metrics
from paperworks.services.moe.dpsl.model import ModelConfig, TokenClassifier, upcycle
from paperworks.services.moe.dpsl.world import World


def _dirichlet(alpha, n, seed):
    return torch.distributions.Dirichlet(torch.tensor(alpha, dtype=torch.float64)).sample((n,))


@pytest.mark.parametrize("alpha", [[0.5] * 4, [0.25] * 4, [2.0, 2.0, 0.05, 0.05]])
def test_dpsl_is_near_zero_on_samples_of_its_prior(alpha):
    torch.manual_seed(0)
    loss, per = losses.DPSL(alpha)(_dirichlet(alpha, 4096, 0))
    assert float(loss) < 1e-3 and per.shape == (4,)
    other = losses.DPSL([4.0] * 4)(_dirichlet(alpha, 4096, 0))[0]
    assert float(other) > 20 * float(loss)


def test_per_modality_dpsl_is_the_mean_over_subsets():
    torch.manual_seed(1)
    priors = [[2.0, 2.0, 0.1, 0.1], [0.1, 0.1, 2.0, 2.0]]
    probs = torch.softmax(torch.randn(300, 4, dtype=torch.float64), -1)
    groups = (torch.rand(300) < 0.3).long()
    _, per = losses.DPSL(priors)(probs, groups)
    expected = torch.stack([losses.DPSL(priors[g])(probs[groups == g])[1] for g in (0, 1)]).mean(0)
    torch.testing.assert_close(per, expected)
    probs.requires_grad_()
    loss, _ = losses.DPSL(priors)(probs, groups)
    loss.backward()
    assert torch.isfinite(probs.grad).all() and probs.grad.abs().sum() > 0


def test_dpsl_sharpens_free_logits_toward_the_prior():
    torch.manual_seed(2)
    logits = (0.02 * torch.randn(256, 4)).requires_grad_()
    dpsl = losses.DPSL([0.25] * 4)
    opt = torch.optim.Adam([logits], lr=0.1)
    for _ in range(120):
        loss, _ = dpsl(logits.softmax(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    prior = _dirichlet([0.25] * 4, 20000, 0)
    assert float(loss.detach()) < 5e-3
    assert float(logits.detach().softmax(-1).max(1).values.mean()) == pytest.approx(
        float(prior.max(1).values.mean()), abs=0.05
    )


def test_switch_load_balance_and_z_loss_formulas():
    probs = torch.full((8, 4), 0.25)
    selected = torch.arange(8).reshape(4, 2) % 4
    selected = torch.cat([selected, selected])
    assert float(losses.switch_load_balance(probs, selected)) == pytest.approx(1.0)
    skewed = torch.zeros(8, 2, dtype=torch.long)
    assert float(losses.switch_load_balance(probs, skewed)) == pytest.approx(4 * 0.25)
    peaked = torch.tensor([[0.7, 0.1, 0.1, 0.1]] * 8)
    assert float(losses.switch_load_balance(peaked, skewed)) == pytest.approx(4 * 0.7)
    logits = torch.randn(5, 4)
    assert float(losses.z_loss(logits)) == pytest.approx(float((logits.logsumexp(-1) ** 2).mean()))


def test_router_loss_terms_and_warmup():
    torch.manual_seed(3)
    logits = torch.randn(64, 4)
    record = {"logits": logits, "probs": logits.softmax(-1), "selected": logits.topk(2).indices}
    mix = losses.RouterLoss(
        [losses.RouterTerm("dpsl", 2.0, alpha=[0.5], warmup_steps=10), losses.RouterTerm("z_loss", 0.1)], 4
    )
    total, parts = mix([record], step=0)
    assert set(parts) == {"dpsl_0", "z_loss_1"}
    assert float(total) == pytest.approx(2.0 * parts["dpsl_0"] + 0.1 * parts["z_loss_1"], rel=1e-5)
    _, later = mix([record], step=10)
    assert set(later) == {"z_loss_1"}
    with pytest.raises(ValueError, match="alpha"):
        losses.RouterLoss([losses.RouterTerm("dpsl", alpha=[1.0, 1.0])], 4)
    with pytest.raises(ValueError, match="unknown"):
        losses.RouterLoss([losses.RouterTerm("kl_mean")], 4)


def _dense(seed=0):
    torch.manual_seed(seed)
    return TokenClassifier(ModelConfig(d_in=6, d_model=16, heads=2, d_ff=24, layers=2, classes=3)).eval()


def test_upcycling_copies_the_dense_function_and_drop_upcycling_breaks_symmetry():
    dense = _dense()
    x = torch.randn(5, 7, 6)
    moe = upcycle(dense, 4, 2).eval()
    torch.testing.assert_close(moe(x), dense(x), atol=1e-5, rtol=1e-5)
    layer = moe.moe_layers()[0]
    assert layer.record["probs"].shape == (35, 4) and layer.record["selected"].shape == (35, 2)
    assert torch.equal(layer.w_in[0], layer.w_in[3])
    dropped = upcycle(dense, 4, 2, drop_ratio=0.5, seed=1).moe_layers()[0]
    changed = (dropped.w_in[0] != dense.blocks[0].ffn.w_in.weight).any(1)
    assert int(changed.sum()) == 12 and not torch.equal(dropped.w_in[0], dropped.w_in[1])
    with pytest.raises(ValueError, match="already"):
        upcycle(moe, 4, 2)


def test_aux_free_bias_moves_toward_the_underloaded_experts():
    moe = upcycle(_dense(), 4, 1)
    layer = moe.moe_layers()[0]
    with torch.no_grad():
        layer.router.weight.zero_()
        layer.router.weight[0] = 1.0
    moe(torch.randn(4, 8, 6))
    layer.update_bias(0.1)
    load = torch.bincount(layer.record["selected"].reshape(-1), minlength=4)
    assert torch.equal(layer.bias, 0.1 * torch.sign(load.float().mean() - load.float()))


def test_routing_metrics():
    probs = torch.tensor([[0.9, 0.1, 0.0, 0.0], [0.0, 0.0, 0.1, 0.9]] * 50, dtype=torch.float64)
    record = {"probs": probs, "selected": probs.topk(2).indices}
    modality = torch.tensor([0, 1] * 50)
    m = metrics.routing_metrics(record, modality)
    assert m["mutual_information"] == pytest.approx(1.0) and m["modality_entropy"] == pytest.approx(1.0)
    assert m["confidence"] == pytest.approx(0.9) and m["max_mean_load"] == pytest.approx(1.0)
    assert len(m["cvm"]) == 4 and m["expert_confidence"][0] == pytest.approx(0.9)
    shuffled = metrics.mutual_information(np.array([0, 1] * 500), np.array([0, 0, 1, 1] * 250))
    assert shuffled == pytest.approx(0.0, abs=1e-9)


def test_world_is_seeded_and_two_modal():
    w = World(0)
    a = w.sample(np.random.default_rng(1), 64)
    b = World(0).sample(np.random.default_rng(1), 64)
    assert torch.equal(a.x, b.x) and a.x.shape == (64, 8, 16)
    assert set(a.modality.tolist()) == {0, 1} and a.token_modality().shape == (64, 8)
