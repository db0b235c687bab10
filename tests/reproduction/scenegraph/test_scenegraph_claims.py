"""DS-Net's claims in miniature (SGDet on synthetic scenes), against baselines from the same run.

The scenes plant interactions (riding, holding, wearing, pulling) in layouts that
also satisfy a geometric predicate, draw them without their cue 40% of the time,
and label an interaction with its geometric predicate half of the time: the label
bias the paper describes (geometric predicates over-predicted, entangled with the
non-geometric ones they co-occur with), with the interactions as the long tail.
Claim 3: removing the fusion is measured in this world (the vision stream needs the layout);
one-way fusion and one stream only in a second world (`experiments.OCCLUSION_WORLD`) where the
space stream needs the pixels too: overlapping pairs whose order only the pixels show.
"""
from __future__ import annotations

import pytest
from paperworks.services.scenegraph import experiments

BASES = ("motifs", "penet")
MIN_GAIN = 0.02  # the paper reports +1.3 to +6.1 mR@100 (here, seeds 0-2: MOTIFS +0.022 to +0.058)
MAX_RECALL_DROP = 0.04
TRAINING_SEEDS = experiments.TRAINING_SEEDS  # every claim compares means over these


def _pair(run, base):
    return tuple(run.measure_over_seeds(name, TRAINING_SEEDS) for name in (base, f"{base}+dsnet"))


# the first test trains the world's detector and six relation models: ~100 s on a quiet core
@pytest.mark.timeout(900)
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


OCCLUSION_ABLATIONS = ("single-stream", "vision-stream-only", "one-way-fusion")


def _ablation(run, ablation):
    return tuple(run.measure_over_seeds(name, TRAINING_SEEDS)
                 for name in ("penet", "penet+dsnet", f"penet+dsnet/{ablation}"))


@pytest.mark.timeout(900)
def test_removing_the_fusion_loses_part_of_the_gain(sgg_run):
    """Claim 3 in the first world, for the fusion as a whole: two streams with their own losses and no
    cross-attention. The interactions are planted in layouts that also satisfy a geometric predicate,
    and the vision stream reads the layout through space -> vision fusion; without it, the interactions
    fall back to their geometric predicate. Full head minus no fusion (seeds 0 / 1 / 2, means over three
    training seeds): mR@100 +0.019 / +0.036 / +0.032, non-geometric mR@100 +0.075 / +0.103 / +0.097.
    One-way fusion (space -> vision) keeps that direction and ties with the full head in this world
    (-0.009 / +0.009 / +0.007; README, claim 3), so it is measured in the occlusion world below."""
    original, full, ablated = _ablation(sgg_run, "no-fusion")
    print(f"no fusion: mR@100 {ablated['mR@100']:.3f} vs {full['mR@100']:.3f} "
          f"(penet {original['mR@100']:.3f}); "
          f"non-geometric {ablated['mR@100_non_geometric']:.3f} vs {full['mR@100_non_geometric']:.3f}; "
          f"interactions -> geometric {ablated['ng_as_geo_rate']:.3f} vs {full['ng_as_geo_rate']:.3f}")
    assert ablated["mR@100"] >= original["mR@100"] + MIN_GAIN  # part of the gain, not all of it, is lost
    assert full["mR@100"] >= ablated["mR@100"] + 0.01
    assert full["mR@100_non_geometric"] >= ablated["mR@100_non_geometric"] + 0.04


# the first of these trains the occlusion world's detector, estimator and nine relation models (~120 s
# on a quiet core): past the default per-test timeout on a loaded machine
@pytest.mark.timeout(900)
def test_cutting_vision_to_space_fusion_loses_the_predicates_only_pixels_decide(occlusion_run):
    """Claim 3 where this world lets it show. Which of two overlapping objects is in front only the
    pixels tell; the vision stream gets the detector's depth-order estimates, and the space stream,
    which scores "in front of" / "behind", gets them only through vision -> space fusion. With it, the
    full head orders the labelled detected pairs right 0.73-0.77 of the time (seeds 0-2, means over three
    training seeds); one-way fusion (space -> vision only) stays near a coin flip (0.46-0.51), and the two
    predicates' mean R@100 falls from 0.47-0.54 to 0.32-0.35. Its overall mR@100 edge is printed, not
    asserted: -0.008 / +0.041 / +0.041 over the seeds (README, claim 3)."""
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
def test_the_vision_stream_alone_loses_part_of_the_gain(occlusion_run):
    """Claim 3's "one stream only", read as dropping the space stream: the vision stream alone emits both
    predicate groups. The predicates the boxes decide fall (geometric mR@100, full head minus vision stream
    alone: +0.078 / +0.074 / +0.066 on seeds 0-2) and so does mR@100 (+0.039 / +0.062 / +0.023)."""
    original, full, ablated = _ablation(occlusion_run, "vision-stream-only")
    print(f"vision stream alone: mR@100 geometric {full['mR@100_geometric']:.3f} vs "
          f"{ablated['mR@100_geometric']:.3f}; mR@100 {full['mR@100']:.3f} vs {ablated['mR@100']:.3f} "
          f"(penet {original['mR@100']:.3f})")
    assert full["mR@100_geometric"] >= ablated["mR@100_geometric"] + 0.02
    assert full["mR@100"] >= ablated["mR@100"] + 0.01


@pytest.mark.timeout(900)
@pytest.mark.parametrize("ablation", OCCLUSION_ABLATIONS)
def test_each_ablation_keeps_most_of_the_gain(occlusion_run, ablation):
    """What every ablation keeps is the DS-Net head's split output (a classifier and a loss per predicate
    group, merged as p(g) = Ps(g) Pv(bg)): each still beats the original PE-Net head by MIN_GAIN. One
    stream over both inputs reads the depth-order estimates and the layout directly; that it loses part
    of the gain, as the paper reports, is not reproduced here (its edge is printed: -0.019 / +0.015 /
    +0.005 on seeds 0-2)."""
    original, full, ablated = _ablation(occlusion_run, ablation)
    numbers = {"penet": original["mR@100"], "penet+dsnet": full["mR@100"], ablation: ablated["mR@100"]}
    print(f"mR@100 {numbers}; full head minus {ablation}: {full['mR@100'] - ablated['mR@100']:+.3f}")
    assert ablated["mR@100"] >= original["mR@100"] + MIN_GAIN, numbers
