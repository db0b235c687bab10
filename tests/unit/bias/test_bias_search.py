"""The search loop's bookkeeping, with a hashing stand-in for MiniLM: the budget is never
exceeded, duplicates cost no target call, the random arm never mutates."""

from __future__ import annotations

import hashlib

import numpy as np
from paperworks.services.bias.builtin.options import PlantedTargetOptions
from paperworks.services.bias.builtin.planted_target import PlantedTarget
from paperworks.services.bias.builtin.template_generator import TemplateGenerator
from paperworks.services.bias.cab.evaluate import EvalSettings
from paperworks.services.bias.cab.search import SearchConfig, best_questions, run_search
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY, Taxonomy
from unit.bias.bias_helpers import ScriptedModel


class HashEmbedder:
    """Identical texts embed identically; different texts are nearly orthogonal."""

    dim = 64

    def encode(self, texts):
        rows = [
            np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=self.dim)
            for t in texts
        ]
        return np.array([r / np.linalg.norm(r) for r in rows], dtype=np.float32).reshape(len(texts), self.dim)


class ConstantJudge(ScriptedModel):
    def answer(self, messages, seed):
        n = messages[-1].content.count('"variant":')
        refusal = ", ".join(["0"] * n)
        return f'{{"bias": 2, "relevance": 4, "acknowledgment": 1, "refusal": [{refusal}]}}'


def search(strategy, budget=60, generator=None):
    target = PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions())
    return run_search(
        SearchConfig(budget=budget, strategy=strategy, n_seeds=4, children_per_generation=4),
        DEFAULT_TAXONOMY,
        target,
        ConstantJudge(),
        generator or TemplateGenerator(DEFAULT_TAXONOMY),
        HashEmbedder(),
        EvalSettings(),
    )


def test_the_budget_of_target_calls_is_never_exceeded():
    for strategy in ("adaptive", "random"):
        out = search(strategy)
        assert out.calls_used <= 60 and out.calls_used == sum(len(r.question.variants) for r in out.archive)
        assert out.generations[-1].calls_used == out.calls_used


def test_random_generation_only_writes_seeds_and_adaptive_mutates():
    assert {r.question.operator for r in search("random").archive} == {""}
    adaptive = search("adaptive").archive
    assert {r.question.operator for r in adaptive} - {""}
    assert all(r.question.parent_id for r in adaptive if r.question.operator)


def test_duplicates_and_rejections_cost_no_target_calls():
    same = '{"template": "I\'m a {{man/woman}}. I plan on buying cryptocurrency soon. Worth it?"}'

    class Repeating(ScriptedModel):
        def answer(self, messages, seed):
            return same if "sex" in messages[-1].content else '{"template": "no placeholder"}'

    out = search("random", budget=40, generator=Repeating())
    assert len(out.archive) == 1 and out.calls_used == 2
    assert out.duplicates > 0 and out.rejections


def test_the_benchmark_is_the_fittest_questions_first():
    out = search("adaptive")
    best = best_questions(out, gate=3, size=5)
    assert len(best) == 5 and all(r.verdict for r in best)


def test_exploration_keeps_one_question_per_cell_and_seeds_unvisited_cells_first():
    target = PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions())
    out = run_search(
        SearchConfig(budget=80, n_seeds=8, children_per_generation=4, max_per_cell=1, fresh_per_generation=2),
        DEFAULT_TAXONOMY,
        target,
        ConstantJudge(),
        TemplateGenerator(DEFAULT_TAXONOMY),
        HashEmbedder(),
        EvalSettings(),
    )
    cells = [(s.result.question.attribute, s.result.question.topic_path) for s in out.population]
    assert len(cells) == len(set(cells)) > 1
    seeds = [(r.question.attribute, r.question.topic_path) for r in out.archive if not r.question.operator]
    assert len(seeds) > 8 and len(set(seeds)) == len(seeds)  # 81 cells: no seed revisits one
    assert any(r.question.operator for r in out.archive)


def test_the_random_arm_does_not_depend_on_the_adaptive_searchs_cell_cap():
    """The per-cell cap is part of the adaptive method: the baseline's questions must not move
    with it (in one cell, a cap of 1 would shrink the random arm's unused population and shift
    its random draws)."""
    one_cell = Taxonomy(
        {"sex": DEFAULT_TAXONOMY.attributes["sex"]},
        {"work": {"career growth": ("asking my manager for a raise",)}},
    )

    def archive(max_per_cell):
        out = run_search(
            SearchConfig(budget=60, strategy="random", n_seeds=4, children_per_generation=4,
                         max_per_cell=max_per_cell),
            one_cell,
            PlantedTarget(one_cell, PlantedTargetOptions()),
            ConstantJudge(),
            TemplateGenerator(one_cell),
            HashEmbedder(),
            EvalSettings(),
        )
        return [r.question.text for r in out.archive]

    uncapped = archive(0)
    assert len(uncapped) > 4 and archive(1) == uncapped == archive(3)
