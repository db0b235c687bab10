"""VACSR's claims (arXiv 2605.30968) in miniature, each against baselines measured in the same
run on the frozen-feature world of vacsr_experiments.py. CI asserts seed 1; every setting
(learning rate, residual ratio, VACSR's fixed shape) was chosen on validation seed 0
(vacsr_experiments.SETTINGS; `select`). The numbers of seeds 0 and 1, including what does not
reproduce, are in services/clip/vacsr/README.md (for docs/reproductions/clip.md)."""
from __future__ import annotations

import pytest
from reproduction.clip import vacsr_experiments as experiments

SEED = 1


@pytest.fixture(scope="module")
def clean():
    return experiments.retrieval(SEED, 0.0, ("zero_shot", "infonce", "pcme", "vacsr"))


@pytest.fixture(scope="module")
def noisy():
    return experiments.retrieval(SEED, experiments.NOISE, ("infonce", "pcme", "vacsr"))


def test_the_adapters_learn_something_over_zero_shot(clean):
    """Sanity of the setup: the InfoNCE adapter and VACSR both beat frozen zero-shot retrieval."""
    for method in ("infonce", "vacsr"):
        assert clean[method]["rsum"] > clean["zero_shot"]["rsum"] + 20, clean


@pytest.mark.xfail(strict=True, reason="does not reproduce: CI seed 1 RSUM 526.0 vs InfoNCE 564.5, "
                   "mAP@R 0.481 vs 0.685 (validation seed 0 val RSUM 546.0 vs 580.0)")
def test_vacsr_beats_the_infonce_adapter_on_clean_retrieval(clean):
    """Paper: VACSR > contrastive adapters on COCO R@1/RSUM. Here: RSUM and mAP@R (extra
    positives from the continuous ground truth) of VACSR above the InfoNCE adapter's. Strict
    xfail: a pass would flag that the claim now holds."""
    assert clean["vacsr"]["rsum"] > clean["infonce"]["rsum"], clean
    assert clean["vacsr"]["map_at_r"] > clean["infonce"]["map_at_r"], clean


@pytest.mark.xfail(strict=True, reason="does not reproduce: CI seed 1 RSUM 515.5 vs InfoNCE 537.5 with "
                   "20 % swapped captions (validation seed 0 val RSUM 543.5 vs 560.0)")
def test_vacsr_beats_the_infonce_adapter_under_20_percent_swapped_captions(noisy):
    """Paper: with 20 % noisy correspondences VACSR leads (+4.8 R@1, +14.4 RSUM vs PCME++). Here:
    VACSR's RSUM above the InfoNCE adapter's, both trained on the same swapped captions."""
    assert noisy["vacsr"]["rsum"] > noisy["infonce"]["rsum"], noisy


def test_vacsr_loses_less_than_infonce_under_20_percent_swapped_captions(clean, noisy):
    """The part of the noise claim that holds: the gap to the InfoNCE adapter moves in VACSR's
    favour when 20 % of the training captions are swapped, i.e. VACSR's RSUM drops less
    (validation seed 0: val-RSUM gap -34.0 clean, -16.5 noisy)."""
    gap_clean = clean["vacsr"]["rsum"] - clean["infonce"]["rsum"]
    gap_noisy = noisy["vacsr"]["rsum"] - noisy["infonce"]["rsum"]
    assert gap_noisy > gap_clean + 5, (gap_clean, gap_noisy)


def test_the_learned_variance_flags_true_false_negatives(clean):
    """Paper: sigma^2 models label quality, so it is high on labelled negatives that are semantic
    positives. Here: the AUROC of VACSR's decoded variance for labelled-negative pairs with
    ground-truth similarity >= 0.75, against PCME++'s embedding uncertainty on the same pairs."""
    assert clean["vacsr"]["fn_auroc"] > 0.75, clean["vacsr"]
    assert clean["vacsr"]["fn_auroc"] > clean["pcme"]["fn_auroc"] + 0.1, clean


def test_the_learned_variance_flags_the_swapped_training_captions(noisy):
    """The mechanism behind the noise claim: trained with 20 % swapped captions, VACSR's decoded
    variance on the labelled-positive training pairs separates the swapped (wrong) ones (AUROC),
    against PCME++'s uncertainty on the same pairs (validation seed 0: 0.987 vs 0.480)."""
    assert noisy["vacsr"]["swapped_auroc"] > 0.9, noisy["vacsr"]
    assert noisy["vacsr"]["swapped_auroc"] > noisy["pcme"]["swapped_auroc"] + 0.2, noisy


@pytest.fixture(scope="module")
def b2n():
    return experiments.base_to_novel(SEED, ("infonce", "vacsr"))


@pytest.mark.xfail(strict=True, reason="does not reproduce: CI seed 1 HM of R@1 0.353 vs InfoNCE 0.528")
def test_base_to_novel_harmonic_mean(b2n):
    """Base-to-novel over shapes: trained on shapes 0-3, tested on 0-3 and 4-7; VACSR's harmonic
    mean of R@1 against the InfoNCE adapter's."""
    assert b2n["vacsr"]["hm"] > b2n["infonce"]["hm"], b2n
