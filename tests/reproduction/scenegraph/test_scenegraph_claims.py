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
MIN_GAIN = 0.02  # the paper reports +1.3 to +6.1 mR@100 (measured here: +4.3 to +13.4)
MAX_RECALL_DROP = 0.04


@pytest.mark.parametrize("base", BASES)
def test_dsnet_head_raises_mean_recall_and_keeps_recall(sgg_run, base):
    original, dsnet = sgg_run.measure(base), sgg_run.measure(f"{base}+dsnet")
    assert dsnet["mR@100"] >= original["mR@100"] + MIN_GAIN, (original["mR@100"], dsnet["mR@100"])
    assert dsnet["R@100"] >= original["R@100"] - MAX_RECALL_DROP, (original["R@100"], dsnet["R@100"])


@pytest.mark.parametrize("base", BASES)
def test_gain_lands_on_non_geometric_and_tail_predicates(sgg_run, base):
    original, dsnet = sgg_run.measure(base), sgg_run.measure(f"{base}+dsnet")
    ng_gain = dsnet["mR@100_non_geometric"] - original["mR@100_non_geometric"]
    geo_gain = dsnet["mR@100_geometric"] - original["mR@100_geometric"]
    assert ng_gain >= 0.05 and ng_gain > geo_gain + 0.05, (ng_gain, geo_gain)
    tail_gain = dsnet["mR@100_tail"] - original["mR@100_tail"]
    head_gain = dsnet["mR@100_head"] - original["mR@100_head"]
    assert tail_gain > head_gain + 0.03, (tail_gain, head_gain)


@pytest.mark.parametrize("base", BASES)
def test_geometric_over_prediction_falls(sgg_run, base):
    original, dsnet = sgg_run.measure(base), sgg_run.measure(f"{base}+dsnet")
    # annotated interactions whose pair's top-1 predicate is geometric
    assert dsnet["ng_as_geo_rate"] <= original["ng_as_geo_rate"] - 0.05
    # the geometric share of top-1 predictions on annotated pairs
    assert dsnet["geo_share_predicted"] < original["geo_share_predicted"]


def test_one_stream_for_both_groups_loses_part_of_the_gain(sgg_run):
    original, full = sgg_run.measure("penet"), sgg_run.measure("penet+dsnet")
    single = sgg_run.measure("penet+dsnet/single-stream")
    assert single["mR@100"] <= full["mR@100"] - 0.02, (single["mR@100"], full["mR@100"])
    assert single["mR@100"] >= original["mR@100"] - 0.01, (single["mR@100"], original["mR@100"])


def test_one_way_fusion_keeps_the_gain_at_this_scale(sgg_run):
    """Fusing space -> vision only keeps most of the gain here: the bidirectional head's edge over it
    was -0.017 to +0.033 mR@100 over seeds 0-2, inside the seed noise (README), so only the part
    that holds is asserted: the one-way head still beats the original head."""
    original = sgg_run.measure("penet")
    one_way = sgg_run.measure("penet+dsnet/one-way-fusion")
    assert one_way["mR@100"] >= original["mR@100"] + MIN_GAIN, (one_way["mR@100"], original["mR@100"])
