"""DS-Net's claims in miniature (SGDet on synthetic scenes), against baselines from the same run.

The scenes plant interactions (riding, holding, wearing, pulling) in layouts that
also satisfy a geometric predicate, draw them without their cue 40% of the time,
and label an interaction with its geometric predicate half of the time: the label
bias the paper describes (geometric predicates over-predicted, entangled with the
non-geometric ones they co-occur with), with the interactions as the long tail.
Claim 3 is measured in a second world (`experiments.OCCLUSION_WORLD`) where the space stream
needs the pixels too: overlapping pairs whose order only the pixels show. In this one the space
stream needs nothing from the vision stream, so vision -> space fusion has nothing to carry; its
ablations (both one-way directions, no fusion) tie with the full head here and are reported by the
benchmark, not asserted. CI runs seed 0 only; each margin below holds on seeds 0, 1 and 2 (means over
three training seeds) with room over the training-seed noise (docs/reproductions/scenegraph.md).
"""
from __future__ import annotations

import pytest
from reproduction.scenegraph import experiments

BASES = ("motifs", "penet")
MIN_GAIN = 0.02  # the paper reports +1.3 to +6.1 mR@100 (here, seeds 0-2: MOTIFS +0.044 to +0.046)
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


def _ablation(run, ablation):
    return _means(run, "penet", "penet+dsnet", f"penet+dsnet/{ablation}")


# the first of these trains the occlusion world's detector, estimator and 18 relation models (~230 s
# on a quiet core, in its own process): past the default per-test timeout on a loaded machine
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kept", ["penet+dsnet", "penet+dsnet/vision-to-space-only"])
def test_vision_to_space_fusion_carries_the_predicates_only_pixels_decide(occlusion_run, kept):
    """Claim 3 where this world lets it show. Which of two overlapping objects is in front only the
    pixels tell; the vision stream gets the detector's depth-order estimates, and the space stream,
    which scores "in front of" / "behind", gets them only through vision -> space fusion. The full head
    and vision -> space fusion alone order the labelled detected pairs right 0.78-0.83 of the time
    (seeds 0-2, means over three training seeds); space -> vision fusion alone stays near a coin flip
    (0.45-0.50), and the two predicates' mean R@100 falls from 0.58-0.60 to 0.32-0.36."""
    with_it, without = _means(occlusion_run, kept, "penet+dsnet/space-to-vision-only")
    print(f"{kept} vs space -> vision only: depth order {with_it['depth_order_accuracy']:.3f} vs "
          f"{without['depth_order_accuracy']:.3f}; their R@100 {with_it['mR@100_depth_order']:.3f} vs "
          f"{without['mR@100_depth_order']:.3f}; mR@100 {with_it['mR@100']:.3f} vs {without['mR@100']:.3f}")
    assert with_it["depth_order_accuracy"] >= 0.6, with_it["depth_order_accuracy"]
    assert with_it["depth_order_accuracy"] >= without["depth_order_accuracy"] + 0.2
    assert with_it["mR@100_depth_order"] >= without["mR@100_depth_order"] + 0.1


@pytest.mark.timeout(900)
def test_the_vision_stream_alone_loses_part_of_the_gain(occlusion_run):
    """Claim 3's "one stream only", read as dropping the space stream: the vision stream alone emits both
    predicate groups; the predicates the boxes decide fall (geometric mR@100, full head minus vision
    stream alone: +0.147 / +0.096 / +0.096 on seeds 0-2) and so does overall mR@100 (+0.121 / +0.099 /
    +0.102; one training seed's edge ranges from -0.009 to +0.162). Its lead over the original head
    (+0.056 / +0.078 / +0.041) is inside that noise, so it is reported, not asserted."""
    original, full, ablated = _ablation(occlusion_run, "vision-stream-only")
    print(f"vision stream alone: mR@100 geometric {full['mR@100_geometric']:.3f} vs "
          f"{ablated['mR@100_geometric']:.3f}; mR@100 {full['mR@100']:.3f} vs {ablated['mR@100']:.3f} "
          f"(penet {original['mR@100']:.3f})")
    assert full["mR@100_geometric"] >= ablated["mR@100_geometric"] + 0.05
    assert full["mR@100"] >= ablated["mR@100"] + 0.03


@pytest.mark.timeout(900)
@pytest.mark.parametrize("ablation", ["single-stream", "space-to-vision-only", "vision-to-space-only"])
def test_the_other_ablations_keep_most_of_the_gain(occlusion_run, ablation):
    """What every ablation keeps is the DS-Net head's split output, a classifier and a loss per predicate
    group, merged as p(g) = Ps(g) Pv(bg): each scores well above the original PE-Net head (seeds 0-2:
    one stream over both inputs +0.128 / +0.157 / +0.079, space -> vision only +0.166 / +0.159 / +0.084,
    vision -> space only +0.220 / +0.171 / +0.117). Whether each also loses part of the gain is not
    asserted: full head minus ablation, one stream +0.049 / +0.020 / +0.064 and space -> vision only
    +0.011 / +0.018 / +0.059 are inside the training-seed noise (a mean of three seeds moves by about
    0.03), and vision -> space only matches or beats the full head (-0.043 / +0.006 / +0.026)."""
    original, full, ablated = _ablation(occlusion_run, ablation)
    numbers = {"penet": original["mR@100"], "penet+dsnet": full["mR@100"], ablation: ablated["mR@100"]}
    print(f"mR@100 {numbers}; full head minus {ablation}: {full['mR@100'] - ablated['mR@100']:+.3f}; "
          f"non-geometric {full['mR@100_non_geometric']:.3f} vs {ablated['mR@100_non_geometric']:.3f}")
    assert ablated["mR@100"] >= original["mR@100"] + MIN_GAIN, numbers
