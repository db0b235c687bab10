"""The vlm papers' claims in miniature, each against a baseline measured in the same run, on the CI
seed 1 (settings chosen on validation seeds: 0 for modality following, 11 for CFPO). The benchmark
(tests/benchmarks/bench_vlm.py) runs seeds 1-3 and reports mean ± s.d.; docs/reproductions/vlm.md
holds the logs, including what does not reproduce."""
from __future__ import annotations

import pytest
from reproduction.vlm import experiments

SEED = 1


@pytest.fixture(scope="module")
def following():
    return experiments.modality_following(SEED)


@pytest.mark.parametrize("index", ["entropy", "one_minus_max"])
def test_a_following_falls_with_relative_uncertainty(following, index):
    """(a) P(follow text) falls monotonically as the text's relative uncertainty rises, under two
    indices, for both models."""
    for model in ("text_skew", "vision_skew"):
        law = following[model]["laws"][index]
        assert law["spearman_binned"] <= -0.8, (model, law)
        assert law["spearman_items"] < 0 and law["spearman_items_p"] < 1e-6, (model, law)


def test_b_balance_point_tracks_the_induced_preference(following):
    """(b) the text-skewed model's balance point lies on the text side of the vision-skewed one's,
    the bootstrap CIs apart, under both indices; its position in the dU distribution agrees
    between the indices."""
    for index in ("entropy", "one_minus_max"):
        text, vision = following["text_skew"]["laws"][index], following["vision_skew"]["laws"][index]
        assert text["ci"][0] > vision["ci"][1], (index, text, vision)
    q = [following["text_skew"]["laws"][i]["balance_quantile"] for i in ("entropy", "one_minus_max")]
    assert abs(q[0] - q[1]) < 0.1, q


def test_c_more_oscillations_near_the_balance_point(following):
    """(c) more logit-lens switches in the ambiguous band than in the clear band."""
    osc = following["text_skew"]["oscillations"]
    assert osc["ambiguous"] > osc["clear"] and osc["p_greater"] < 0.01, osc


def test_d_boundary_sft_beats_easy_sft(following):
    """(d) SFT toward vision on 200 boundary cases moves the held-out balance point further toward
    vision than SFT on 200 easy cases. The paper's second half, better held-out following across the
    grid, is not asserted: it held on validation seed 0 (0.727 vs 0.606) but not on this seed
    (0.603 vs 0.615); the benchmark reports it over three seeds."""
    s = following["steering"]
    before, boundary, easy = s["before"], s["boundary"], s["easy"]
    shift_boundary = before["balance_point"] - boundary["balance_point"]
    shift_easy = before["balance_point"] - easy["balance_point"]
    assert shift_boundary > shift_easy, s


@pytest.fixture(scope="module")
def rl_runs():
    return experiments.cfpo(SEED)


def _anti(runs, name: str) -> float:
    return runs[name]["anti_prior"]["accuracy"]


@pytest.mark.xfail(strict=True, reason="does not reproduce on CI seed 1: CFPO 0.543 vs GRPO/DAPO 0.538 "
                   "(validation seed 11: 0.505 vs 0.472); see docs/reproductions/vlm.md")
def test_cfpo_beats_grpo_and_dapo_on_the_anti_prior_split(rl_runs):
    """CFPO-G over GRPO and CFPO-D over DAPO on anti-prior questions (paper: +3.17-6.25 points),
    averaged over the two bases; every run from the same warmed weights with the same budget.
    Strict xfail: the margin fixed before the CI seed was run is not met; a pass would flag it."""
    cfpo = (_anti(rl_runs, "cfpo-grpo") + _anti(rl_runs, "cfpo-dapo")) / 2
    plain = (_anti(rl_runs, "grpo") + _anti(rl_runs, "dapo")) / 2
    assert cfpo > plain + 0.01, rl_runs
    assert _anti(rl_runs, "cfpo-grpo") > rl_runs["warm"]["anti_prior"]["accuracy"], rl_runs


def test_cfpo_is_on_par_with_papo(rl_runs):
    """At least on par with the PAPO-style baseline (paper: +1.32-2.13 points), within 2 points."""
    cfpo = (_anti(rl_runs, "cfpo-grpo") + _anti(rl_runs, "cfpo-dapo")) / 2
    papo = (_anti(rl_runs, "papo-grpo") + _anti(rl_runs, "papo-dapo")) / 2
    assert cfpo >= papo - 0.02, rl_runs
