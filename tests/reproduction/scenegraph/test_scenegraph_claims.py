"""DS-Net's claims in miniature (SGDet on synthetic scenes), against baselines from the same run.

The scenes plant interactions (riding, holding, wearing, pulling) in layouts that
also satisfy a geometric predicate, draw them without their cue 40% of the time,
and label an interaction with its geometric predicate half of the time: the label
bias the paper describes (geometric predicates over-predicted, entangled with the
non-geometric ones they co-occur with), with the interactions as the long tail.
Claim 3 is measured in a second world (`experiments.OCCLUSION_WORLD`) where the space stream
needs the pixels too: overlapping pairs whose order only the pixels show. In this one the space
stream needs nothing from the vision stream, so vision -> space fusion has nothing to carry.
"""
from __future__ import annotations

import pytest
from reproduction.scenegraph import experiments

BASES = ("motifs", "penet")
MIN_GAIN = 0.02  # the paper reports +1.3 to +6.1 mR@100 (here, seeds 0-2: MOTIFS +0.054 to +0.057)
MAX_RECALL_DROP = 0.04


def _means(run, *names):
    """Each variant's metrics, averaged over `experiments.TRAINING_SEEDS`: every claim compares these."""
    return tuple(run.measure_over_seeds(name, experiments.TRAINING_SEEDS) for name in names)


# the first test trains the world's detector and six relation models: ~90 s on a quiet core
@pytest.mark.timeout(900)
@pytest.mark.parametrize("base", BASES)
def test_dsnet_head_raises_mean_recall_and_keeps_recall(sgg_run, base):
    original, dsnet = _means(sgg_run, base, f"{base}+dsnet")
    assert dsnet["mR@100"] >= original["mR@100"] + MIN_GAIN, (original["mR@100"], dsnet["mR@100"])
    assert dsnet["R@100"] >= original["R@100"] - MAX_RECALL_DROP, (original["R@100"], dsnet["R@100"])


@pytest.mark.parametrize("base", BASES)
def test_gain_lands_on_non_geometric_and_tail_predicates(sgg_run, base):
    original, dsnet = _means(sgg_run, base, f"{base}+dsnet")
    ng_gain = dsnet["mR@100_non_geometric"] - original["mR@100_non_geometric"]
    geo_gain = dsnet["mR@100_geometric"] - original["mR@100_geometric"]
    assert ng_gain >= 0.05 and ng_gain > geo_gain + 0.05, (ng_gain, geo_gain)
    tail_gain = dsnet["mR@100_tail"] - original["mR@100_tail"]
    head_gain = dsnet["mR@100_head"] - original["mR@100_head"]
    assert tail_gain > head_gain + 0.03, (tail_gain, head_gain)


@pytest.mark.parametrize("base", BASES)
def test_geometric_over_prediction_falls(sgg_run, base):
    original, dsnet = _means(sgg_run, base, f"{base}+dsnet")
    # annotated interactions whose pair's top-1 predicate is geometric
    assert dsnet["ng_as_geo_rate"] <= original["ng_as_geo_rate"] - 0.05
    # the geometric share of top-1 predictions on annotated pairs
    assert dsnet["geo_share_predicted"] < original["geo_share_predicted"]


OCCLUSION_ABLATIONS = ("single-stream", "vision-stream-only", "one-way-fusion")


def _ablation(run, ablation):
    return _means(run, "penet", "penet+dsnet", f"penet+dsnet/{ablation}")


# the first of these trains the occlusion world's detector, estimator and nine relation models (~120 s
# on a quiet core): past the default per-test timeout on a loaded machine
@pytest.mark.timeout(900)
def test_cutting_vision_to_space_fusion_loses_the_predicates_only_pixels_decide(occlusion_run):
    """Claim 3 where this world lets it show. Which of two overlapping objects is in front only the
    pixels tell; the vision stream gets the detector's depth-order estimates, and the space stream,
    which scores "in front of" / "behind", gets them only through vision -> space fusion. With it, the
    full head orders the labelled detected pairs right 0.80-0.82 of the time (seeds 0-2, means over three
    training seeds); one-way fusion (space -> vision only) stays near a coin flip (0.46-0.50), and the two
    predicates' mean R@100 falls from 0.57-0.59 to 0.33-0.36."""
    ablation = "one-way-fusion"
    original, full, ablated = _ablation(occlusion_run, ablation)
    print(f"{ablation}: depth order {full['depth_order_accuracy']:.3f} vs "
          f"{ablated['depth_order_accuracy']:.3f}; "
          f"their R@100 {full['mR@100_depth_order']:.3f} vs {ablated['mR@100_depth_order']:.3f}; "
          f"mR@100 geometric {full['mR@100_geometric']:.3f} vs {ablated['mR@100_geometric']:.3f}; "
          f"mR@100 {original['mR@100']:.3f} (penet) / {full['mR@100']:.3f} / {ablated['mR@100']:.3f}; "
          f"full head minus {ablation}: {full['mR@100'] - ablated['mR@100']:+.3f}")
    assert full["depth_order_accuracy"] >= 0.6, full["depth_order_accuracy"]
    assert full["depth_order_accuracy"] >= ablated["depth_order_accuracy"] + 0.1
    assert full["mR@100_depth_order"] >= ablated["mR@100_depth_order"] + 0.03


@pytest.mark.timeout(900)
def test_the_vision_stream_alone_loses_the_predicates_the_boxes_decide(occlusion_run):
    """Claim 3's "one stream only", read as dropping the space stream: the vision stream alone emits both
    predicate groups, and the predicates the boxes decide fall (geometric mR@100, full head minus vision
    stream alone: +0.105 / +0.089 / +0.093 on seeds 0-2)."""
    original, full, ablated = _ablation(occlusion_run, "vision-stream-only")
    print(f"vision stream alone: mR@100 geometric {full['mR@100_geometric']:.3f} vs "
          f"{ablated['mR@100_geometric']:.3f}; mR@100 {full['mR@100']:.3f} vs {ablated['mR@100']:.3f} "
          f"(penet {original['mR@100']:.3f})")
    assert full["mR@100_geometric"] >= ablated["mR@100_geometric"] + 0.02


@pytest.mark.timeout(900)
@pytest.mark.parametrize("ablation", OCCLUSION_ABLATIONS)
def test_each_ablation_loses_part_of_the_gain(occlusion_run, ablation):
    """Claim 3 itself: each ablation scores below the full head and above the original PE-Net head (by
    MIN_GAIN: what every ablation keeps is the DS-Net head's split output, a classifier and a loss per
    predicate group, merged as p(g) = Ps(g) Pv(bg)). Full head minus ablation, mR@100 on seeds 0-2: one
    stream over both inputs +0.064 / +0.049 / +0.038 (most of it on the non-geometric predicates), the
    vision stream alone +0.069 / +0.076 / +0.065, one-way fusion +0.012 / +0.034 / +0.063."""
    original, full, ablated = _ablation(occlusion_run, ablation)
    numbers = {"penet": original["mR@100"], "penet+dsnet": full["mR@100"], ablation: ablated["mR@100"]}
    print(f"mR@100 {numbers}; full head minus {ablation}: {full['mR@100'] - ablated['mR@100']:+.3f}; "
          f"non-geometric {full['mR@100_non_geometric']:.3f} vs {ablated['mR@100_non_geometric']:.3f}")
    assert ablated["mR@100"] >= original["mR@100"] + MIN_GAIN, numbers
    assert full["mR@100"] > ablated["mR@100"], numbers
