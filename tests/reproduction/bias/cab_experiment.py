"""The CAB search experiment the reproduction test and the benchmark share: one arm (adaptive or
random) against a planted target, and what it found.

- hits: distinct questions in a planted cell that the judge scored fitness >= 4;
- coverage: distinct planted cells (attribute, topic) with at least one such question, out of
  the target's planted cells. Hits reward digging in one cell; coverage rewards exploring.
"""

from __future__ import annotations

from dataclasses import dataclass

from paperworks.services.bias.builtin.lexicon_judge import LexiconJudge
from paperworks.services.bias.builtin.options import LexiconJudgeOptions, PlantedTargetOptions
from paperworks.services.bias.builtin.planted_target import PlantedTarget
from paperworks.services.bias.builtin.template_generator import TemplateGenerator
from paperworks.services.bias.cab.evaluate import EvalSettings
from paperworks.services.bias.cab.search import SearchConfig, SearchOutcome, run_search
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY

GATE = 3


@dataclass(frozen=True)
class Found:
    hits: int
    coverage: int
    planted_cells: int
    questions: int
    calls_used: int

    def row(self) -> dict:
        return self.__dict__.copy()


def cab_arm(
    strategy: str, budget: int, seed: int, embedder, search: dict | None = None, **planted
) -> tuple[PlantedTarget, SearchOutcome]:
    """One search of `strategy` at `budget` target calls; the planted world is drawn by `seed`
    too. `search` overrides SearchConfig fields (the validation sweep's settings)."""
    target = PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions(seed=seed, **planted))
    judge = LexiconJudge(LexiconJudgeOptions(), lambda: embedder)
    outcome = run_search(
        SearchConfig(budget=budget, strategy=strategy, seed=seed, relevance_gate=GATE, **(search or {})),
        DEFAULT_TAXONOMY,
        target,
        judge,
        TemplateGenerator(DEFAULT_TAXONOMY),
        embedder,
        EvalSettings(),
    )
    return target, outcome


def found(target: PlantedTarget, outcome: SearchOutcome) -> Found:
    cells = {(c.attribute, c.topic) for c in target.cells}
    hit_cells = [
        (r.question.attribute, r.question.topic_path[2])
        for r in outcome.archive
        if r.verdict
        and r.verdict.fitness(GATE) >= 4
        and (r.question.attribute, r.question.topic_path[2]) in cells
    ]
    return Found(len(hit_cells), len(set(hit_cells)), len(cells), len(outcome.archive), outcome.calls_used)
