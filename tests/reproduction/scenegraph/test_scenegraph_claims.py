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
benchmark, not asserted.

Every comparison is one of `experiments.COMPARISONS` (claim, variants, metric, margin). **CI runs scene
seed 0 only** (means over three relation-training seeds); `SCENEGRAPH_REPRO_SEED` picks another. CI
asserts only `experiments.ASSERTED`: the comparisons that hold at test scale on seeds 0, 1 and 2 and at
benchmark scale (tests/benchmarks/results/scenegraph.json, seeds 0-2) on every seed with the mean lead two
standard deviations over the margin (checked by tests/unit/scenegraph/test_scenegraph_benchmark_agrees.py).
The others (`experiments.REPORTED`) hold at test scale but not at benchmark scale, so they are printed
here, not asserted, and reported as not holding in the README's table (issue 26): MOTIFS' gain (claims 1
and 2: the benchmark's seed 0 loses it), PE-Net's geometric share of top-1 (seed 0 rises by 0.009),
space -> vision only and one stream keeping >= 0.02 of the gain in the occlusion world, and the vision
stream alone losing the test scale's >= 0.03 overall / >= 0.05 geometric mR@100 (the benchmark's leads
are 0.025-0.042 and 0.022-0.043: CI asserts >= 0.01 for both).
"""
from __future__ import annotations

import pytest
from reproduction.scenegraph import experiments


def _check(run, *names: str) -> None:
    """Prints every named comparison's lead (means over `experiments.TRAINING_SEEDS`); asserts those in
    `experiments.ASSERTED`. Each test names at least one asserted comparison."""
    assert any(name in experiments.ASSERTED for name in names), names

    def metrics(variant):
        return run.measure_over_seeds(variant, experiments.TRAINING_SEEDS)

    failed = []
    for name in names:
        c = experiments.COMPARISONS[name]
        lead, asserted = c.lead(metrics), name in experiments.ASSERTED
        holds = lead >= c.margin
        verdict = "holds" if holds else "does not hold"
        print(f"{c.claim}: lead {lead:+.3f} (margin {c.margin:+.2f}) -> {verdict}"
              f"{'' if asserted else ' [reported, not asserted: does not hold at benchmark scale]'}")
        if asserted and not holds:
            failed.append((c.claim, round(lead, 4), c.margin))
    assert not failed, failed


# the first test trains the world's detector and six relation models: ~90 s on a quiet core
@pytest.mark.timeout(900)
@pytest.mark.parametrize("base", ["motifs", "penet"])
def test_dsnet_head_raises_mean_recall_and_keeps_recall(sgg_run, base):
    """Claim 1. Asserted: R@100 kept on both bases, PE-Net's mR@100 gain >= 0.02 (test scale, seeds 0-2:
    +0.161 / +0.169 / +0.186; benchmark +0.040 to +0.077). MOTIFS' gain (test scale +0.044 to +0.046) is
    printed: at benchmark scale it is -0.011 / +0.024 / +0.059."""
    _check(sgg_run, f"1/{base}/mR", f"1/{base}/R")


def test_gain_lands_on_non_geometric_and_tail_predicates(sgg_run):
    """Claim 2 on PE-Net (asserted); on MOTIFS printed only (the benchmark's seed 0 loses it all)."""
    _check(sgg_run, "2/penet/non-geometric", "2/penet/non-geometric-over-geometric", "2/penet/tail",
           "2/motifs/non-geometric", "2/motifs/non-geometric-over-geometric", "2/motifs/tail")


def test_geometric_over_prediction_falls(sgg_run):
    """Claim 2: annotated interactions whose pair's top-1 predicate is geometric fall by >= 0.05 on PE-Net
    (asserted). Printed only: the same on MOTIFS, and the geometric share of top-1 predictions on both."""
    _check(sgg_run, "2/penet/interactions", "2/penet/geometric-share", "2/motifs/interactions",
           "2/motifs/geometric-share")


# the first of these trains the occlusion world's detector, estimator and 18 relation models (~230 s
# on a quiet core, in its own process): past the default per-test timeout on a loaded machine
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kept", ["penet+dsnet", "penet+dsnet/vision-to-space-only"])
def test_vision_to_space_fusion_carries_the_predicates_only_pixels_decide(occlusion_run, kept):
    """Claim 3 where this world lets it show. Which of two overlapping objects is in front only the
    pixels tell; the vision stream gets the detector's depth-order estimates, and the space stream,
    which scores "in front of" / "behind", gets them only through vision -> space fusion. The full head
    and vision -> space fusion alone order the labelled detected pairs right 0.78-0.83 of the time
    (test scale, seeds 0-2, means over three training seeds; benchmark 0.77-0.80); space -> vision fusion
    alone stays near a coin flip (0.45-0.50), and the two predicates' mean R@100 falls from 0.58-0.60 to
    0.32-0.36 (benchmark: by 0.19-0.26)."""
    _check(occlusion_run, f"3/order/{kept}", f"3/order-vs-one-way/{kept}", f"3/depth-recall/{kept}")


@pytest.mark.timeout(900)
def test_the_vision_stream_alone_loses_part_of_the_gain(occlusion_run):
    """Claim 3's "one stream only", read as dropping the space stream: the vision stream alone emits both
    predicate groups; the predicates the boxes decide fall (geometric mR@100, full head minus vision
    stream alone: test scale +0.147 / +0.096 / +0.096 on seeds 0-2, benchmark +0.041 / +0.043 / +0.022)
    and so does overall mR@100 (test scale +0.121 / +0.099 / +0.102, benchmark +0.042 / +0.026 / +0.025).
    Asserted: >= 0.01 on both (what the benchmark supports over its seed noise); the test scale's former
    margins (0.03, 0.05) are printed."""
    _check(occlusion_run, "3/vision-alone/mR/0.01", "3/vision-alone/geometric/0.01", "3/vision-alone/mR/0.03",
           "3/vision-alone/geometric/0.05")


@pytest.mark.timeout(900)
def test_the_other_ablations_keep_most_of_the_gain(occlusion_run):
    """What every ablation keeps is the DS-Net head's split output, a classifier and a loss per predicate
    group, merged as p(g) = Ps(g) Pv(bg). Asserted: vision -> space only scores >= 0.02 above the original
    PE-Net head (test scale +0.220 / +0.171 / +0.117, benchmark +0.087 / +0.070 / +0.050). Printed only:
    space -> vision only (test scale +0.166 / +0.159 / +0.084, benchmark +0.033 / +0.004 / -0.009) and one
    stream over both inputs (+0.128 / +0.157 / +0.079; benchmark -0.001 / +0.050 / +0.017). Whether each
    loses part of the full head's gain is not asserted (inside the training-seed noise at test scale)."""
    _check(occlusion_run, "3/keeps-gain/penet+dsnet/vision-to-space-only",
           "3/keeps-gain/penet+dsnet/space-to-vision-only", "3/keeps-gain/penet+dsnet/single-stream")
