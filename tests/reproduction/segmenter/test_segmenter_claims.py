"""SEMIR and WNE claims in miniature, each against a baseline measured in the same run.

CI asserts seed 0 only (conftest.py); the benchmark measures seeds 0, 1, 2 and the service
README's table of claims reports mean ± s.d. and whether each claim holds on every seed.

1. The lifting map is exact and the minor compact; the minor's oracle Dice is reported.
2. Learned few-shot parameters beat the paper-style manual vector (`search.manual`) on boundary
   Dice, the objective they are fitted to. Lesion Dice of the trained pipeline: the learned minor
   beats the old hand-set vector (ψ 0.1 R, no deletion: it cannot represent a lesion) by far, but
   NOT the manual vector (seed 0: 0.785 vs 0.830), which is printed, not asserted.
3. SEMIR vs a small dense 3D U-Net, both binary lesion-vs-rest, every training volume in each
   optimizer step, the U-Net's steps and learning rate chosen by a validation curve on validation
   seeds: the assertions follow what held on the benchmark's seeds (see `CLAIM3`).
4. WNE, both models trained without the gain augmentation: NE defect <= 1e-5 in float32 where the
   bare backbone's is large; at the training noise level within 0.3 dB of the bare backbone (the
   paper has WNE slightly worse; printed either way); better by > 1 dB at sigma 0.3. At sigma 0.02
   WNE is worse than the bare backbone (seed 0: 34.1 vs 35.6 dB): printed, not asserted.
"""

from __future__ import annotations

import numpy as np
import pytest
from paperworks.services.segmenter import data
from paperworks.services.segmenter.semir import search
from reproduction.segmenter import experiments

# what claim 3 asserts on seed 0, set from the benchmark's three seeds (what held there, with a
# margin): SEMIR's lesion Dice above the U-Net's by `win[r]` at radius r; the gap at 1.5 above
# the gap at 3.0 by `widens` (None: not asserted). Keep bench_segmenter.CI_CLAIM3 in step.
# Not asserted: a win at radius 3.0 (the U-Net reached 0.73-0.75 there on the validation seeds,
# SEMIR 0.72 on seed 0).
CLAIM3 = {"win": {1.5: 0.02}, "widens": 0.1}


@pytest.mark.timeout(1200)  # the session fixture's run lands here; minutes at load
def test_claim1_lifting_is_exact_and_oracle_dice_is_reported(fewshot_run):
    cfg = data.PhantomConfig(lesion_radius=2.0)
    vols = [data.phantom(cfg, s)[0] for s in range(3)]
    for params in (search.hand_set(vols), search.MinorParams(**fewshot_run["learned"])):
        run = experiments.lifting(cfg, range(900, 904), params)
        print("claim 1:", params, run)
        assert run["exact"]
        assert run["supernodes"] < run["voxels"] / 4 / 20  # a compact minor: > 20 voxels per supernode
        assert 0.0 < run["oracle"][2] <= 1.0 and run["oracle"][1] > 0.8


@pytest.mark.timeout(1200)  # the session fixture's run lands here; minutes at load
def test_claim2_learned_parameters_beat_the_manual_vector_on_boundary_dice(fewshot_run):
    hand, manual, learned = (fewshot_run[k + "_scores"] for k in ("hand", "manual", "learned"))
    print("claim 2:", fewshot_run)
    print(
        f"claim 2 lesion Dice: learned {learned['lesion_dice']:.3f}, manual {manual['lesion_dice']:.3f} "
        f"({'learned wins' if learned['lesion_dice'] > manual['lesion_dice'] else 'manual wins'}), "
        f"hand-set {hand['lesion_dice']:.3f}"
    )
    assert learned["boundary_dice"] > manual["boundary_dice"] + 0.01
    assert learned["boundary_dice"] > hand["boundary_dice"]
    # the old hand-set vector merges the lesions into their organs; the learned minor keeps them
    assert learned["lesion_dice"] > hand["lesion_dice"] + 0.2


# two radii, each a minor search, a GINE and a U-Net on every volume per step: minutes on a quiet
# 2-core machine, over the suite's 300 s timeout when the machine is shared
@pytest.mark.timeout(1200)
def test_claim3_semir_vs_a_dense_unet_across_lesion_radii(dense_run):
    print("claim 3:", dense_run)
    radii = sorted(dense_run, reverse=True)  # largest lesions first
    for r in radii:
        # every test volume holds lesions, so the pooled Dice measures segmentation, not empty volumes
        assert dense_run[r]["test_volumes_without_lesions"] == 0
        print(f"radius {r}: SEMIR {dense_run[r]['semir']:.3f} U-Net {dense_run[r]['unet']:.3f}")
    for r, margin in CLAIM3["win"].items():
        assert dense_run[r]["semir"] > dense_run[r]["unet"] + margin, r
    gaps = [dense_run[r]["gap"] for r in radii]
    if CLAIM3["widens"] is not None:
        assert gaps[-1] > gaps[0] + CLAIM3["widens"], gaps


@pytest.mark.timeout(1200)  # the session fixture's run lands here; minutes at load
def test_claim4_wne_is_equivariant_and_generalizes_to_higher_noise(wne_run):
    print("claim 4:", wne_run)
    assert not wne_run["augment"]
    assert wne_run["defect"]["wne"] <= 1e-5 < 1e-2 < wne_run["defect"]["none"]
    psnr = wne_run["psnr"]
    print(
        f"matched noise (sigma 0.1): WNE {psnr[0.1]['wne']:.2f} dB vs bare {psnr[0.1]['none']:.2f} dB; "
        f"sigma 0.02: WNE {psnr[0.02]['wne']:.2f} vs bare {psnr[0.02]['none']:.2f} (not asserted)"
    )
    assert psnr[0.1]["wne"] >= psnr[0.1]["none"] - 0.3
    assert psnr[0.3]["wne"] > psnr[0.3]["none"] + 1.0
    assert all(np.isfinite(v) for s in psnr.values() for v in s.values())
