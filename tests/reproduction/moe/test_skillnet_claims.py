"""SkillNet's claims (Xie et al., ICML 2026) in miniature, each against baselines trained in the same run
on the same demonstrations, steps, batch, learning rate and seed (tests/reproduction/moe/
skillnet_experiments.py, settings `CI`: 8 demonstrations per training composition, 400 AdamW steps of
batch 128, MSE action-chunk head, 150 few-shot steps with replay, 25 seeded rollouts per task).

CI asserts seed 1. The settings and which claims to assert were fixed on validation seed 0 (seed 1 ran
alongside with the same settings, which were not changed afterwards). Validation seed 0 measured: zero-
shot SkillNet 0.025 vs dense 0.070 / token-MoE 0.060 (does not reproduce: strict xfail); few-shot 0.150
vs 0.100 / 0.070 (reproduces: asserted); routing-hierarchy Spearman 0.04 (no clear relation: strict
xfail; measured with the MSE head routed at t = 0.5, before routing_by_skill fed it its training input t
= 0; with the final code seed 1 gives -0.32, token-MoE -0.01). At this size every policy is far from
converged (first-subtask rates 0.2-0.4). With 2000 steps and 300 few-shot steps (validation seed 0;
skillnet_experiments' __main__ with {"steps": 2000, "ft_steps": 300}) the few-shot win does not hold
either: SkillNet 0.28 vs dense 0.32 / token-MoE 0.35 (zero-shot 0.09 vs 0.175 / 0.20; Spearman -0.34),
so the asserted few-shot result is a small-budget effect, not the paper's claim reproduced. Paper: +16.0
% zero-shot and +23.9 % few-shot."""
from __future__ import annotations

import pytest
from reproduction.moe import skillnet_experiments as experiments

SEED = 1
pytestmark = pytest.mark.timeout(1200)  # the module fixture trains three policies: minutes at load


@pytest.fixture(scope="module")
def runs():
    return experiments.run(SEED, ("skillnet", "dense", "token_moe"))


@pytest.mark.xfail(strict=True, reason="does not reproduce at CI size: validation seed 0 SkillNet 0.025 vs "
                   "dense 0.070, token-MoE 0.060 on held-out compositions; see docs/reproductions/moe.md")
def test_zero_shot_compositions_skillnet_beats_dense_and_token_moe(runs):
    """Success on the 8 held-out compositions (25 seeded rollouts each): SkillNet above both the
    dense FFN and the token-routed MoE. Strict xfail: a pass would flag that it now reproduces."""
    s = runs["skillnet"]["zero_shot"]
    assert s > runs["dense"]["zero_shot"] and s > runs["token_moe"]["zero_shot"], runs


def test_few_shot_new_verb_skillnet_leads_at_the_small_ci_budget(runs):
    """Success on the 4 `slide` tasks after fine-tuning on 5 demonstrations each (slide shares push's
    motion cluster, so SkillNet's router sees a known cluster embedding): SkillNet above both at the
    CI budget. This is not the paper's claim reproduced: trained longer (2000 steps, validation seed
    0) the order reverses (0.28 vs 0.32 / 0.35), and the README reports the claim as not reproduced;
    the test guards the small-budget effect the README describes."""
    s = runs["skillnet"]["few_shot"]
    assert s > runs["dense"]["few_shot"] and s > runs["token_moe"]["few_shot"], runs


@pytest.mark.xfail(strict=True, reason="does not reproduce at CI size: validation seed 0 Spearman 0.04 "
                   "(token-MoE -0.05); see docs/reproductions/moe.md")
def test_routing_similarity_tracks_hierarchy_similarity(runs):
    """Spearman correlation between per-skill routing similarity (1 - JS of the mean expert
    distributions) and hierarchy similarity over the 34 pairs of skills with different verbs: above
    0.3 for SkillNet and above the token-routed MoE's. Strict xfail."""
    s, t = runs["skillnet"]["routing_spearman"], runs["token_moe"]["routing_spearman"]
    assert s > 0.3 and s > t, runs
