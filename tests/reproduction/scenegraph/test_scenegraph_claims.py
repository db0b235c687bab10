"""DS-Net's claims in miniature (SGDet on synthetic scenes), against baselines from the same run.

The scenes plant interactions (riding, holding, wearing, pulling) in layouts that
also satisfy a geometric predicate, draw them without their cue 40% of the time,
and label an interaction with its geometric predicate half of the time: the label
bias the paper describes (geometric predicates over-predicted, entangled with the
non-geometric ones they co-occur with), with the interactions as the long tail.
"""
from __future__ import annotations

import pytest

BASES = ("motifs", "penet")
MIN_GAIN = 0.02  # the paper reports +1.3 to +6.1 mR@100 (here, 3-seed means: +0.026 MOTIFS, +0.092 PE-Net)
MAX_RECALL_DROP = 0.04
# Claims 1 and 2 compare means over this many relation-training seeds (one detector, one scene set):
# with one seed, MOTIFS' gain from the head ranged from -0.006 to +0.049 mR@100 (seeds 0-2).
TRAINING_SEEDS = 3


def _pair(run, base):
    return tuple(run.measure_over_seeds(name, TRAINING_SEEDS) for name in (base, f"{base}+dsnet"))


@pytest.mark.parametrize("base", BASES)
def test_dsnet_head_raises_mean_recall_and_keeps_recall(sgg_run, base):
    original, dsnet = _pair(sgg_run, base)
    assert dsnet["mR@100"] >= original["mR@100"] + MIN_GAIN, (original["mR@100"], dsnet["mR@100"])
    assert dsnet["R@100"] >= original["R@100"] - MAX_RECALL_DROP, (original["R@100"], dsnet["R@100"])


@pytest.mark.parametrize("base", BASES)
def test_gain_lands_on_non_geometric_and_tail_predicates(sgg_run, base):
    original, dsnet = _pair(sgg_run, base)
    ng_gain = dsnet["mR@100_non_geometric"] - original["mR@100_non_geometric"]
    geo_gain = dsnet["mR@100_geometric"] - original["mR@100_geometric"]
    assert ng_gain >= 0.05 and ng_gain > geo_gain + 0.05, (ng_gain, geo_gain)
    tail_gain = dsnet["mR@100_tail"] - original["mR@100_tail"]
    head_gain = dsnet["mR@100_head"] - original["mR@100_head"]
    assert tail_gain > head_gain + 0.03, (tail_gain, head_gain)


@pytest.mark.parametrize("base", BASES)
def test_geometric_over_prediction_falls(sgg_run, base):
    original, dsnet = _pair(sgg_run, base)
    # annotated interactions whose pair's top-1 predicate is geometric
    assert dsnet["ng_as_geo_rate"] <= original["ng_as_geo_rate"] - 0.05
    # the geometric share of top-1 predictions on annotated pairs
    assert dsnet["geo_share_predicted"] < original["geo_share_predicted"]


ABLATIONS = ("single-stream", "one-way-fusion", "no-fusion")


@pytest.mark.parametrize("ablation", ABLATIONS)
def test_the_gain_survives_each_ablation_of_streams_and_fusion(sgg_run, ablation):
    """Claim 3 as far as it reproduces here. The paper says one stream only, or one-way fusion, each lose
    part of the gain; at this scale neither loss is separable from the seed noise (README, claim 3):
    over seeds 0-2 the full head's edge over one stream was +0.006 to +0.044 mR@100, over one-way fusion
    -0.037 to +0.054, over no fusion at all -0.004 to +0.058. What holds on every seed is that the gain
    comes with the DS-Net head's split output (a classifier and a loss per predicate group, merged as
    p(g) = Ps(g) Pv(bg)), which every ablation keeps: each still beats the original PE-Net head by
    MIN_GAIN (measured: +0.034 to +0.150). The ablation's edge over or under the full head is printed
    (shown with `pytest -rA` or `-s`), not asserted. With the fusion made pair-aligned (the same-pair
    bonus in `CrossFusion`) the ties stayed: full minus one-way -0.002 / -0.003 / -0.004, minus no fusion
    +0.003 / -0.050 / +0.005 (README: the synthetic world gives fusion nothing to carry). A world built to
    give it something (frequent overlapping pairs ordered only by the pixels, holding / pulling sharing one
    cue) did not separate the ablations either: no variant ordered the overlapping pairs better than chance
    from the frozen detector's features (README, claim 3)."""
    original, full = sgg_run.measure("penet"), sgg_run.measure("penet+dsnet")
    ablated = sgg_run.measure(f"penet+dsnet/{ablation}")
    numbers = {"penet": original["mR@100"], "penet+dsnet": full["mR@100"], ablation: ablated["mR@100"]}
    print(f"mR@100 {numbers}; full head minus {ablation}: {full['mR@100'] - ablated['mR@100']:+.3f}")
    assert ablated["mR@100"] >= original["mR@100"] + MIN_GAIN, numbers
