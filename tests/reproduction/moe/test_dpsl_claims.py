"""DPSL's claims (arXiv 2510.01185) in miniature, each against the Switch load-balancing baseline
measured in the same run: a dense transformer trained on the synthetic two-modality stream,
upcycled to 4 experts (top-2), every arm trained the same 200 steps on the same batches. CI asserts
seed 7; the settings were chosen on validation seeds 100 and 101 (docs/reproductions/moe.md)."""

from __future__ import annotations

import pytest
from reproduction.moe import dpsl_experiments as ex

SEED = 7
pytestmark = pytest.mark.timeout(1200)  # the module fixture trains a dense model and three arms


@pytest.fixture(scope="module")
def arms():
    return ex.dpsl_arms(SEED)


def test_dpsl_is_near_zero_on_samples_of_the_prior():
    assert ex.prior_fit(ex.SYMMETRIC * 4, 4096) < 1e-3
    assert ex.prior_fit(ex.ASYMMETRIC[0], 4096) < 1e-3


def test_sparse_prior_sharpens_routing_and_keeps_balance(arms):
    """alpha = 0.25 < 1: higher mean max routing probability and lower routing entropy than LB-only,
    while max/mean expert load stays <= 1.2 (layers' means, held-out tokens)."""
    lb, dpsl = arms["load_balance"], arms["dpsl_symmetric"]
    assert dpsl["confidence"] >= lb["confidence"] + 0.1, (dpsl, lb)
    assert dpsl["entropy"] <= lb["entropy"] - 0.2, (dpsl, lb)
    assert dpsl["max_mean_load"] <= 1.2, dpsl


def test_asymmetric_prior_specialises_experts_by_modality(arms):
    """The per-modality prior makes the top-1 expert carry the modality far more than LB-only does
    (the weaker, reproducing half of the claim; the 0.9 H bar is the xfail below)."""
    lb, asym = arms["load_balance"], arms["dpsl_asymmetric"]
    assert asym["mutual_information"] >= lb["mutual_information"] + 0.3, (asym, lb)
    assert asym["max_mean_load"] <= 1.2, asym


@pytest.mark.xfail(
    strict=True,
    reason="does not reproduce: I(modality; top-1) reaches 0.72-0.85 H (validation seeds 100/101: "
    "0.72/0.78 bits, seed 7: 0.85), short of 0.9 H; the CvM distance is insensitive to the prior's tails",
)
def test_asymmetric_prior_reaches_nine_tenths_of_the_modality_entropy(arms):
    asym = arms["dpsl_asymmetric"]
    assert asym["mutual_information"] >= 0.9 * asym["modality_entropy"], asym


def test_task_accuracy_is_at_least_the_baselines(arms):
    lb = arms["load_balance"]["accuracy"]
    for name in ("dpsl_symmetric", "dpsl_asymmetric"):
        assert arms[name]["accuracy"] >= lb - 0.01, (name, arms[name], lb)
