"""SpatioLM's claims (arXiv 2608.01899) in miniature, each against baselines measured in the same
run on the CI seed 1 (settings, `spatiolm_experiments.CI`, chosen on validation seed 0; the
benchmark runs seeds 1-3 at `spatiolm_experiments.BENCH`). One base VLM is pre-trained on
general + spatial QA; every arm gets the same spatial-QA pool, steps, batch size and learning rate,
and the same held-out items: (i) the frozen base, (ii) full fine-tuning (invasive), (iii) the
zero-init branch with the LM loss only, (iv) the branch with the LM + token + depth + ray losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.services.vlm.spatiolm import qa
from paperworks.services.vlm.spatiolm.model import SpatioBranch
from reproduction.vlm import spatiolm_experiments as experiments

SEED = 1


@pytest.fixture(scope="module")
def arms():
    return experiments.spatiolm(SEED)


def test_zero_init_branch_is_exactly_the_base():
    """Non-invasive at initialisation: a fresh branch leaves every answer logit bit-identical."""
    from paperworks.services.vlm.spatiolm.model import SpatialConfig, SpatialVLM

    torch.manual_seed(SEED)
    config = SpatialConfig(d_model=32, heads=4, frames=2)
    vlm, branch = SpatialVLM(config).eval(), SpatioBranch(config)
    b = qa.sample(np.random.default_rng(SEED), 32, qa.SPATIAL + qa.GENERAL, 2)
    images, tokens = torch.as_tensor(b.images), torch.as_tensor(b.tokens)
    with torch.no_grad():
        assert torch.equal(vlm(images, tokens), vlm(images, tokens, branch)[0])


def test_3d_losses_reach_every_w_out_at_initialisation():
    """The fix for (iv) = base: as in the authors' code, the DPT head and the relational loss read
    the LM's own last visual hidden states besides the branch states, so already at the zero-init
    point the depth loss has a gradient on every W_out (the branch's only way into the LM stream).
    A head on the branch states alone reaches a W_out only through the next branch layer's input,
    so the last attachment's W_out would see nothing but the LM loss, exactly as in (iii)."""
    from paperworks.services.vlm.spatiolm import losses, train
    from paperworks.services.vlm.spatiolm.model import DPTHead, SpatialConfig, SpatialVLM

    torch.manual_seed(SEED)
    config = SpatialConfig(d_model=32, heads=4, frames=1)
    vlm, branch, head = SpatialVLM(config).eval(), SpatioBranch(config), DPTHead(config)
    b = qa.sample(np.random.default_rng(SEED), 8, qa.SPATIAL, 1)
    images, tokens = torch.as_tensor(b.images), torch.as_tensor(b.tokens)
    t = train.Teacher(SEED)(b.depth, b.rays, b.images, np.random.default_rng(SEED))
    _, states, visual = vlm(images, tokens, branch, visual=True)
    out = head(states, visual)
    loss = losses.depth_loss(out["depth"], out["depth_conf"], t["depth"], t["depth_conf"])
    w_out = [layer.w_out.weight for layer in branch.layers.values()]
    assert all(float(g.abs().sum()) > 0 for g in torch.autograd.grad(loss, w_out, retain_graph=True))
    loss = losses.depth_loss(*(head(states)[k] for k in ("depth", "depth_conf")), t["depth"], t["depth_conf"])
    assert torch.autograd.grad(loss, w_out[-1:], allow_unused=True) == (None,)


@pytest.mark.xfail(
    strict=True,
    reason="does not reproduce at CI size: seed 1 (iv) 0.367 acc / 0.464 MRA vs (iii) 0.362 / 0.464 "
    "(base 0.367 / 0.464: at CI size the base barely learns the QA, so there is little to elicit); "
    "validation seed 0: (iv) 0.405 vs (iii) 0.422; the benchmark scale does not win it either "
    "(docs/reproductions/vlm.md)",
)
def test_3d_supervision_beats_the_lm_only_branch_on_spatial_qa(arms):
    """(iv) > (iii) by more than seed noise (0.02): spatial accuracy and VSI-Bench MRA on numeric
    answers."""
    iv, iii = arms["spatio"], arms["lm_only"]
    assert iv["spatial_accuracy"] > iii["spatial_accuracy"] + 0.02, (iv, iii)
    assert iv["spatial_mra"] > iii["spatial_mra"] + 0.02, (iv, iii)


def test_branch_keeps_general_qa(arms):
    """(iv) ~ base: general accuracy within 0.03 of the base (seed 1: 0.545 = base 0.545; weak at
    this size, where the branch moves few answers)."""
    base, iv = (arms[k]["general_accuracy"] for k in ("base", "spatio"))
    assert abs(iv - base) <= 0.03, (iv, base)


def test_full_finetuning_loses_more_general_qa_than_the_branch(arms):
    """Non-invasive vs invasive: (ii)'s general-accuracy drop from the base exceeds (iv)'s by
    0.02 (seed 1: 0.035 vs 0.000; validation seed 0: 0.065 vs 0.000)."""
    base, ft, iv = (arms[k]["general_accuracy"] for k in ("base", "finetune", "spatio"))
    assert base - ft > (base - iv) + 0.02, (base, ft, iv)


@pytest.mark.xfail(
    strict=True,
    reason="does not reproduce at CI size: seed 1 head AbsRel 0.204 vs the pool's mean depth 0.165 "
    "(200 steps; at benchmark scale it reaches the mean-depth level, see docs/reproductions/vlm.md)",
)
def test_head_predicts_depth(arms):
    """The DPT head, trained on the pseudo-teacher, predicts depth: AbsRel vs ground truth below
    the training pool's per-pixel mean depth by a third."""
    assert arms["spatio"]["depth_abs_rel"] < 0.67 * arms["depth_baseline_abs_rel"], arms["spatio"]
