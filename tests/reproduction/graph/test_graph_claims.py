"""GaRA's claims in miniature (`experiments.protocol`), every number measured against same-run
baselines: the frozen LM, static LoRA, the graph-as-soft-token prefix and GaRA without the norm
constraint, all with the same source graphs, budget and early stopping on the same validation graphs.

CI asserts seed 1 (`experiments.CI_SEED`); the settings were chosen on seed 0. Torch runs one
thread (tests/conftest.py) so the trained weights do not depend on the machine's core count.

Measured on seed 1 (docs/reproductions/graph.md): unseen SBM graphs GaRA 0.755, prefix 0.714,
static LoRA 0.583, GaRA without the constraint 0.513, frozen 0.555; held-out families (mean of
Barabási-Albert and Watts-Strogatz) GaRA 0.518, prefix 0.560, static LoRA 0.497; the unconstrained
generated/static norm ratio drifts between 1.4 and 3.7 while the constrained one stays 1.000.
"""

from __future__ import annotations

import math

import pytest

from . import experiments

# the module fixture trains four arms (minutes at load); CI cost: see docs/reproductions/graph.md
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def runs():
    return experiments.protocol(experiments.CI_SEED)


def test_gara_beats_every_baseline_zero_shot_on_unseen_source_family_graphs(runs):
    """GaRA beats static LoRA and the frozen LM by 0.10 on every machine seen. Against the soft-token
    prefix the sign depends on the CPU: +0.041 (0.755 vs 0.714) on the machine that chose the
    settings, -0.086 (0.711 vs 0.797) on another one (same code, packages, seed and one thread:
    training amplifies the machines' floating-point differences). So only "GaRA is competitive with
    the prefix" (within 0.10) is asserted; the README says the win over the prefix is not robust."""
    acc = {arm: r["accuracy"]["sbm"] for arm, r in runs.items()}
    assert acc["gara"] >= acc["static_lora"] + 0.10, acc
    assert acc["gara"] >= acc["frozen"] + 0.10, acc
    assert acc["gara"] >= acc["prefix"] - 0.10, acc


@pytest.mark.xfail(
    strict=True,
    reason="does not reproduce on CI seed 1: on Barabasi-Albert and "
    "Watts-Strogatz graphs GaRA (0.518) is at chance, below the soft-token prefix (0.560); "
    "it does on validation seed 0 (GaRA 0.695, prefix 0.560, static LoRA 0.497)",
)
def test_gara_beats_static_lora_and_prefix_zero_shot_on_held_out_families(runs):
    acc = {arm: r["accuracy"]["held_out_families"] for arm, r in runs.items()}
    assert acc["gara"] >= acc["static_lora"] + 0.05, acc
    assert acc["gara"] >= acc["prefix"] + 0.02, acc


def test_norm_constraint_holds_the_ratio_at_one_and_closes_an_accuracy_gap(runs):
    """The constraint's gain on unseen SBM graphs is machine-dependent too: +0.242 (0.755 vs
    0.513) on the machine that chose the settings, +0.094 (0.745 vs 0.651; validation 0.758 vs
    0.703) on another one, deterministic on each (same code, seed, one thread). A +0.05 margin
    (about 10 of the test queries) is asserted, which every machine seen clears."""
    constrained, free = runs["gara"]["norm_ratios"], runs["gara_no_norm"]["norm_ratios"]
    assert constrained and all(abs(r - 1.0) < 1e-3 for r in constrained), constrained
    # without the constraint the generated factor's norm is free: it drifts far from the static one
    assert free and max(abs(math.log(r)) for r in free) > math.log(1.25), free
    assert runs["gara"]["validation"] >= runs["gara_no_norm"]["validation"] + 0.05
    assert runs["gara"]["accuracy"]["sbm"] >= runs["gara_no_norm"]["accuracy"]["sbm"] + 0.05
