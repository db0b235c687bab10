"""UrbanFusion's claims in miniature (arXiv 2510.13774), each against a baseline from the same run.

Every number is measured here. CI asserts seed 0 only (`URBAN_REPRO_SEED` picks another); the
benchmark runs seeds 0, 1, 2 and its table in services/urban/README.md says what holds on each.
Baseline settings were chosen on validation seed 10, never on 0, 1, 2.
"""
from __future__ import annotations

import numpy as np
from paperworks.services.urban.data import world
from reproduction.urban import experiments


def test_reconstruction_beats_contrastive_only_on_unique_and_synergistic_targets(urban_run):
    scores = experiments.fusion_vs_contrastive(urban_run, kind="mlp")
    print({k: (round(v["fusion"], 3), round(v["contrastive_only"], 3)) for k, v in scores.items()})
    for name, s in scores.items():
        gain = s["fusion"] - s["contrastive_only"]
        if world.INFORMATION[name] in ("unique", "synergistic"):
            assert gain >= 0.03, f"{name}: {s}"
        else:
            assert gain >= -0.02, f"{name} (redundant) got worse: {gain:.3f}"


def test_any_subset_gives_a_usable_embedding_and_more_modalities_do_not_hurt_much(urban_run):
    scores = experiments.any_subset(urban_run)
    assert len(scores) == 31
    for name, s in scores.items():
        assert s["own_probe"] > 0.1, name
        assert s["own_probe"] >= 0.8 * s["concatenated_own_probe"], (name, s)
    best = max(s["own_probe"] for s in scores.values())
    full = scores["+".join(urban_run.train_fs.names)]["own_probe"]
    assert full >= best - 0.02
    for small, s in scores.items():
        for big, b in scores.items():
            if b["size"] == s["size"] + 1 and set(small.split("+")) < set(big.split("+")):
                assert b["own_probe"] >= s["own_probe"] - 0.12, f"{small} -> {big}"
    # A probe fitted on all-modality embeddings keeps working on every subset's embedding, better
    # than the same transfer for concatenated features + coordinates (absent ones at their mean).
    # With coordinates given to the baseline too the lead is small (validation seed 10: +0.028).
    transfer = np.mean([s["full_probe"] for s in scores.values()])
    concat = np.mean([s["concatenated_full_probe"] for s in scores.values()])
    print(f"subset transfer: fusion {transfer:.3f} vs concatenated {concat:.3f}")
    print({k: (round(s["own_probe"], 3), round(s["concatenated_own_probe"], 3)) for k, s in scores.items()})
    assert transfer >= concat + 0.01


def test_coordinates_only_embedding_beats_satclip_style_baseline(urban_run):
    scores = experiments.location_encoding(urban_run)
    print({k: (round(v["fusion_coordinates"], 3), round(v["satclip"], 3)) for k, v in scores.items()})
    fusion = np.mean([s["fusion_coordinates"] for s in scores.values()])
    satclip = np.mean([s["satclip"] for s in scores.values()])
    assert fusion >= satclip + 0.05
    for name in ("house_price", "land_use"):  # information imagery does not carry
        assert scores[name]["fusion_coordinates"] >= scores[name]["satclip"] + 0.1, name
    for name in ("population_density", "green_cover"):  # what imagery carries: no worse
        assert scores[name]["fusion_coordinates"] >= scores[name]["satclip"] - 0.03, name


def test_held_out_cities_with_the_same_inputs_on_both_sides(urban_run):
    # leave-one-region-out: every city held out in turn, probes fitted on the other cities' labels;
    # coordinates on both sides (the embedding vs concatenated features + coordinates). With
    # coordinates on neither side UrbanFusion does not lead (validation seed 10: -0.022): that regime
    # is measured by the benchmark only, and nothing is asserted about it.
    scores = experiments.held_out_cities(urban_run, kind="mlp", no_coordinates=False)
    method, baseline = "fusion", "concatenated+coordinates"
    print({k: (round(v[method], 3), round(v[baseline], 3)) for k, v in scores.items()})
    gain = np.mean([s[method] - s[baseline] for s in scores.values()])
    print(f"held-out cities, both with coordinates: {gain:+.3f}")
    # validation seed 10: +0.033, better on 4/5 (a tie on house price), none worse
    assert gain >= 0.01
    assert sum(s[method] > s[baseline] for s in scores.values()) >= 3
    for name, s in scores.items():
        assert s[method] >= s[baseline] - 0.03, name
