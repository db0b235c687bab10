"""UrbanFusion's claims in miniature (arXiv 2510.13774), each against a baseline from the same run.

Every number is measured here; the margins were chosen from seeds 0, 1 and 2.
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
    # A probe fitted on all-modality embeddings keeps working on every subset's embedding,
    # far better than the same transfer for zero-filled concatenated features.
    transfer = np.mean([s["full_probe"] for s in scores.values()])
    concat = np.mean([s["concatenated_full_probe"] for s in scores.values()])
    print(f"subset transfer: fusion {transfer:.3f} vs concatenated {concat:.3f}")
    assert transfer >= concat + 0.05


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


def test_held_out_cities_are_predicted_better_than_by_concatenated_features(urban_run):
    # leave-one-region-out: every city held out in turn, probes fitted on the other cities' labels
    scores = experiments.held_out_cities(urban_run, kind="mlp")
    print({k: (round(v["fusion"], 3), round(v["concatenated"], 3)) for k, v in scores.items()})
    fusion = np.mean([s["fusion"] for s in scores.values()])
    concat = np.mean([s["concatenated"] for s in scores.values()])
    assert fusion >= concat + 0.015
    assert sum(s["fusion"] > s["concatenated"] for s in scores.values()) >= 4
    for name, s in scores.items():
        assert s["fusion"] >= s["concatenated"] - 0.03, name
