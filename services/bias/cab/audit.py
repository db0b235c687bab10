"""The two CAB jobs as plain functions: search for a benchmark, or audit a model with one.

Both end in the same per-model report (`report.bias_report`) over every question they judged,
with a second judge's agreement on a seeded sample when a second judge is configured.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from paperworks.services.bias.cab.evaluate import EvalSettings, QuestionResult, evaluate_questions, rejudge
from paperworks.services.bias.cab.judge import Verdict
from paperworks.services.bias.cab.question import Question
from paperworks.services.bias.cab.report import bias_report
from paperworks.services.bias.cab.search import (
    GenerationStats,
    SearchConfig,
    SearchOutcome,
    best_questions,
    run_search,
)
from paperworks.services.bias.cab.taxonomy import Taxonomy
from paperworks.services.bias.embedder import SentenceEmbedder
from paperworks.shared.backends import ModelBackend


@dataclass
class GeneratedBenchmark:
    outcome: SearchOutcome
    benchmark: list[QuestionResult]
    report: dict


def agreement_pairs(
    results: Sequence[QuestionResult],
    second: ModelBackend | None,
    settings: EvalSettings,
    sample: int,
    seed: int,
) -> list[tuple[Verdict, Verdict]] | None:
    """(first, second) verdicts on a seeded sample of the judged questions; None without a
    second judge. Questions the second judge cannot score are left out of the sample."""
    if second is None:
        return None
    judged = [r for r in results if r.verdict is not None]
    chosen = random.Random(seed).sample(judged, min(sample, len(judged)))
    verdicts = rejudge(chosen, second, settings)
    return [(r.verdict, v) for r, v in zip(chosen, verdicts, strict=True) if v is not None]


def generate_benchmark(
    config: SearchConfig,
    taxonomy: Taxonomy,
    models: dict[str, ModelBackend | None],
    embedder: SentenceEmbedder,
    settings: EvalSettings,
    *,
    benchmark_size: int,
    bias_threshold: int,
    agreement_sample: int,
    model_label: str,
    on_generation: Callable[[GenerationStats], None] | None = None,
) -> GeneratedBenchmark:
    outcome = run_search(
        config,
        taxonomy,
        models["target"],
        models["judge"],
        models["generator"],
        embedder,
        settings,
        on_generation,
    )
    pairs = agreement_pairs(
        outcome.archive, models.get("second_judge"), settings, agreement_sample, config.seed
    )
    report = bias_report(
        outcome.archive, model=model_label, bias_threshold=bias_threshold, second_judge=pairs
    )
    report["search"] = {
        "strategy": config.strategy,
        "budget_target_calls": config.budget,
        "target_calls_used": outcome.calls_used,
        "questions_evaluated": len(outcome.archive),
        "proposals": outcome.proposals,
        "near_duplicates_dropped": outcome.duplicates,
        "generator_rejections": len(outcome.rejections),
        "rejection_examples": outcome.rejections[:10],
        "generator_errors": outcome.generator_errors[:10],
        "generations": [g.row() for g in outcome.generations],
    }
    return GeneratedBenchmark(outcome, best_questions(outcome, config.relevance_gate, benchmark_size), report)


def evaluate_benchmark(
    questions: Sequence[Question],
    models: dict[str, ModelBackend | None],
    settings: EvalSettings,
    *,
    concurrency: int,
    bias_threshold: int,
    agreement_sample: int,
    model_label: str,
    row_errors: Sequence[dict] = (),
    on_result: Callable[[int, QuestionResult], None] | None = None,
) -> tuple[list[QuestionResult], dict]:
    results = evaluate_questions(
        questions, models["target"], models["judge"], settings, concurrency=concurrency, on_result=on_result
    )
    pairs = agreement_pairs(results, models.get("second_judge"), settings, agreement_sample, settings.seed)
    report = bias_report(
        results, model=model_label, bias_threshold=bias_threshold, second_judge=pairs, row_errors=row_errors
    )
    return results, report
