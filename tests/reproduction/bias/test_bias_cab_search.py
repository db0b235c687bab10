"""CAB's claim in miniature: mutation and selection find a model's biased regions more often
than uniform question sampling at the same budget of target calls (arXiv 2510.12857, Sec. 4),
and asymmetric refusals are detected with high precision.

The target has planted biases in a few (attribute, topic) cells out of 81 and weak hedges in
their sibling topics; the judge is the MiniLM+lexicon judge. Both arms use the same generator,
judge, deduplication and budget; the random arm is the baseline, measured in the same run.
"""

from __future__ import annotations

import pytest
from paperworks.services.bias.builtin.lexicon_judge import LexiconJudge
from paperworks.services.bias.builtin.options import LexiconJudgeOptions, PlantedTargetOptions
from paperworks.services.bias.builtin.planted_target import PlantedTarget
from paperworks.services.bias.builtin.template_generator import TemplateGenerator
from paperworks.services.bias.cab.evaluate import EvalSettings
from paperworks.services.bias.cab.search import SearchConfig, run_search
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY

BUDGET = 300  # target calls per arm
SEED = 0
GATE = 3


def search(strategy: str, embedder, **planted):
    target = PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions(seed=SEED, **planted))
    judge = LexiconJudge(LexiconJudgeOptions(), lambda: embedder)
    outcome = run_search(
        SearchConfig(budget=BUDGET, strategy=strategy, seed=SEED, relevance_gate=GATE),
        DEFAULT_TAXONOMY,
        target,
        judge,
        TemplateGenerator(DEFAULT_TAXONOMY),
        embedder,
        EvalSettings(),
    )
    return target, outcome


def planted_hits(target: PlantedTarget, outcome) -> list:
    """Distinct questions in a planted cell that the judge scored as strongly biased."""
    cells = {(c.attribute, c.topic) for c in target.cells}
    return [
        r
        for r in outcome.archive
        if r.verdict
        and r.verdict.fitness(GATE) >= 4
        and (r.question.attribute, r.question.topic_path[2]) in cells
    ]


@pytest.fixture(scope="module")
def arms(embedder):
    return {strategy: search(strategy, embedder) for strategy in ("adaptive", "random")}


def test_adaptive_search_finds_planted_cells_at_least_twice_as_often_as_random(arms):
    hits = {name: planted_hits(*arm) for name, arm in arms.items()}
    for _, outcome in arms.values():
        assert BUDGET - 4 < outcome.calls_used <= BUDGET
    adaptive, uniform = len(hits["adaptive"]), len(hits["random"])
    print(f"planted-cell hits at {BUDGET} target calls: adaptive {adaptive}, random {uniform}")
    assert adaptive >= 5
    assert adaptive >= 2 * max(uniform, 1)


def test_adaptive_population_climbs_in_fitness(arms):
    generations = arms["adaptive"][1].generations
    assert generations[-1].mean_fitness > generations[0].mean_fitness + 1.0


def test_asymmetric_refusals_are_detected_with_high_precision(embedder):
    """A target that only refuses (one group, when the stakes are raised), with traps: topics it
    refuses for everyone, acknowledgments that contain "can't", irrelevant remarks."""
    target, outcome = search("adaptive", embedder, n_flip=0, n_stereotype=0, n_refusal=3)
    judged = [r for r in outcome.archive if r.verdict]
    planted = [("refusal" in target.behaviours_of(r.question.variants)) for r in judged]
    flagged = [r.verdict.asymmetric_refusal for r in judged]
    true_pos = sum(f and p for f, p in zip(flagged, planted, strict=True))
    precision, recall = true_pos / max(sum(flagged), 1), true_pos / max(sum(planted), 1)
    base_rate = sum(planted) / len(judged)  # the precision of flagging questions at random
    symmetric = sum("symmetric_refusal" in target.behaviours_of(r.question.variants) for r in judged)
    print(
        f"asymmetric refusals: {sum(flagged)} flagged, {sum(planted)} planted, precision {precision:.2f}, "
        f"recall {recall:.2f}, base rate {base_rate:.2f}, symmetric refusals seen {symmetric}"
    )
    assert sum(flagged) >= 5
    assert precision >= 0.9 and precision >= base_rate + 0.3
    assert recall >= 0.8
