"""SpatioLM's claims (arXiv 2608.01899) in miniature, each against baselines measured in the same
run on the CI seed 1 (settings, `spatiolm_experiments.CI`, chosen on validation seed 0; the
benchmark runs seeds 1-3). One base VLM is pre-trained on general + spatial QA; every arm gets the
same spatial-QA pool, steps, batch size and learning rate, and the same held-out items:
(i) the frozen base, (ii) full fine-tuning (invasive), (iii) the zero-init branch with the LM loss
only, (iv) the branch with the LM + token + depth + ray losses."""

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


@pytest.mark.xfail(
    strict=True,
    reason="does not reproduce at CI size: seed 1 (iv) 0.367 acc / 0.464 MRA = (iii) 0.367 / 0.464; "
    "the zero-init branch barely moves any answer in 200 steps (validation seed 0 alike)",
)
def test_3d_supervision_beats_the_lm_only_branch_on_spatial_qa(arms):
    """(iv) > (iii): spatial accuracy and VSI-Bench MRA on numeric answers."""
    iv, iii = arms["spatio"], arms["lm_only"]
    assert iv["spatial_accuracy"] > iii["spatial_accuracy"], (iv, iii)
    assert iv["spatial_mra"] > iii["spatial_mra"], (iv, iii)


def test_branch_keeps_general_qa(arms):
    """(iv) ~ base: general accuracy within 0.03 of the base. Weak at this size: the branch barely
    moves any answer. Not asserted: "(ii) full fine-tuning loses general QA" (seed 1: 0.510 vs base
    0.545, a 0.035 drop; validation seed 0: a 0.002 drop, so it does not hold with a margin over
    seed noise; the README reports it as not reproduced at CI size)."""
    base, iv = (arms[k]["general_accuracy"] for k in ("base", "spatio"))
    assert abs(iv - base) <= 0.03, (iv, base)


@pytest.mark.xfail(
    strict=True,
    reason="does not reproduce at CI size: seed 1 head AbsRel 0.193 vs the pool's mean depth 0.165",
)
def test_head_predicts_depth(arms):
    """The DPT head, trained on the pseudo-teacher, predicts depth: AbsRel vs ground truth below
    the training pool's per-pixel mean depth by a third."""
    assert arms["spatio"]["depth_abs_rel"] < 0.67 * arms["depth_baseline_abs_rel"], arms["spatio"]
