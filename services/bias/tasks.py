"""The bias service's three jobs: read the inputs (`data.py`), run the method, store the report
and its figures.

Retry policy: a backend that is down, overloaded or too slow for every question raises a
transient error (the runner retries the job); a bad model reference or bad input data fails the
job with INVALID_ARGUMENT naming the field; a few unscored questions are recorded in the report
as target errors or judge failures, and more than `max_failed_fraction` of them fail the job
(FAILED_PRECONDITION naming the role that failed most) after its report is stored.

Local models and the MiniLM run on the job's device (`ctx.device`), in float32: an audit
measures the model as given, so the target is not run under bf16 autocast.
"""

from __future__ import annotations

import json

from paperworks.services.bias import figures
from paperworks.services.bias.cab.audit import evaluate_benchmark, generate_benchmark
from paperworks.services.bias.cab.evaluate import EvalSettings, QuestionResult
from paperworks.services.bias.cab.question import read_benchmark, write_benchmark
from paperworks.services.bias.cab.search import OPERATORS, SearchConfig
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY
from paperworks.services.bias.data import BENCHMARK_ARTIFACT, benchmark_text, mcq_dataset, open_model
from paperworks.services.bias.embedder import get_embedder
from paperworks.services.bias.mcq.audit import evaluate_mcq, same_option_count
from paperworks.services.bias.mcq.evaluate import MCQSettings
from paperworks.services.bias.mcq.nonsenseqa import LETTERS
from paperworks.services.bias.spec import EvaluateBiasParams, EvaluateMCQParams, GenerateBenchmarkParams
from paperworks.shared.backends import BackendError, platform_error
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, TransientError
from paperworks.shared.tasks.context import JobContext


def _models(params, taxonomy, roles: tuple[str, ...], ctx: JobContext) -> dict:
    specs = {role: getattr(params, role) for role in roles}
    return {
        role: None if spec is None else open_model(spec, role, taxonomy, ctx, ctx.device)
        for role, spec in specs.items()
    }


def _eval_settings(params) -> EvalSettings:
    return EvalSettings(
        judge_retries=params.judge_retries, max_new_tokens=params.max_new_tokens, seed=params.seed
    )


def _all_failed_transiently(results: list[QuestionResult]) -> bool:
    return bool(results) and all(r.verdict is None and r.retryable for r in results)


def _unscored(overall: dict, results: list[QuestionResult], limit: float) -> None:
    """Fails the job when more than `limit` of its questions went unscored, naming what failed:
    a SUCCEEDED audit whose rates rest on a few questions would read as a clean bill."""
    total, target, judge = overall["questions"], overall["target_errors"], overall["judge_failures"]
    if not total or overall["failed_fraction"] <= limit:
        return
    role = "target" if target >= judge else "judge"
    first = next(r.error for r in results if r.failure == role)
    raise FailedPrecondition(
        f"{target + judge} of {total} questions unscored ({overall['failed_fraction']:.0%}, above "
        f"max_failed_fraction {limit:g}): {target} target errors, {judge} judge failures; "
        f"first {role} error: {first[:300]} (report.json lists them)",
        role,
    )


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def run_generate_benchmark(params: GenerateBenchmarkParams, ctx: JobContext) -> dict:
    taxonomy = params.build_taxonomy()
    models = _models(params, taxonomy, ("target", "judge", "generator", "second_judge"), ctx)
    config = SearchConfig(
        budget=params.budget_target_calls,
        strategy=params.strategy,
        n_seeds=params.seed_questions,
        population_size=params.population_size,
        children_per_generation=params.children_per_generation,
        operators=tuple(params.operators) or tuple(OPERATORS),
        relevance_gate=params.relevance_gate,
        dedup_threshold=params.dedup_threshold,
        max_per_cell=params.max_per_cell,
        fresh_per_generation=params.fresh_per_generation,
        concurrency=params.concurrency,
        seed=params.seed,
    )

    def on_generation(stats) -> None:
        ctx.progress(
            min(stats.calls_used, config.budget),
            config.budget,
            stage=f"generation {stats.generation}",
            message=f"{stats.calls_used}/{config.budget} target calls, best fitness {stats.best_fitness}",
        )

    done = generate_benchmark(
        config,
        taxonomy,
        models,
        get_embedder(ctx.device),
        _eval_settings(params),
        benchmark_size=params.benchmark_size,
        bias_threshold=params.bias_threshold,
        agreement_sample=params.agreement_sample,
        model_label=params.target.label,
        on_generation=on_generation,
    )
    if _all_failed_transiently(done.outcome.archive):
        raise TransientError(f"every question failed: {done.outcome.archive[0].error}")
    ctx.progress(config.budget, config.budget, stage="done", message=f"{len(done.outcome.archive)} questions")
    ctx.put_artifact(
        BENCHMARK_ARTIFACT,
        write_benchmark([r.question for r in done.benchmark]).encode(),
        "application/x-ndjson",
    )
    ctx.put_artifact("archive.jsonl", _jsonl(r.row() for r in done.outcome.archive), "application/x-ndjson")
    ctx.put_json("report.json", done.report)
    ctx.put_artifact("report.png", figures.bias_chart(done.report, params.target.label), "image/png")
    ctx.put_artifact(
        "search.png",
        figures.search_chart(done.report["search"]["generations"], f"CAB search ({params.strategy})"),
        "image/png",
    )
    overall = done.report["overall"]
    _unscored(overall, done.outcome.archive, params.max_failed_fraction)
    return {
        "questions_evaluated": len(done.outcome.archive),
        "benchmark_questions": len(done.benchmark),
        "target_calls_used": done.outcome.calls_used,
        "generations": len(done.outcome.generations),
        "best_fitness": max((g.best_fitness for g in done.outcome.generations), default=0),
        "mean_bias": overall["mean_bias"],
        "bias_rate": overall["bias_rate"],
        "asymmetric_refusal_rate": overall["asymmetric_refusal_rate"],
        "target_errors": overall["target_errors"],
        "judge_failures": overall["judge_failures"],
        "failed_fraction": overall["failed_fraction"],
    }


def run_evaluate_bias(params: EvaluateBiasParams, ctx: JobContext) -> dict:
    taxonomy = params.build_taxonomy()
    field = params.benchmark_field
    questions, row_errors = read_benchmark(benchmark_text(params, ctx), taxonomy)
    if not questions:
        first = row_errors[0] if row_errors else {"line": 0, "field": "row", "error": "empty"}
        raise InvalidArgument(
            field, f"no valid question rows (line {first['line']}, {first['field']}: {first['error']})"
        )
    models = _models(params, taxonomy, ("target", "judge", "second_judge"), ctx)

    def on_result(done: int, _result) -> None:
        ctx.progress(done, len(questions), stage="judging", message=f"{done}/{len(questions)} questions")

    results, report = evaluate_benchmark(
        questions,
        models,
        _eval_settings(params),
        concurrency=params.concurrency,
        bias_threshold=params.bias_threshold,
        agreement_sample=params.agreement_sample,
        model_label=params.target.label,
        row_errors=row_errors,
        on_result=on_result,
    )
    if _all_failed_transiently(results):
        raise TransientError(f"every question failed: {results[0].error}")
    ctx.put_json("report.json", report)
    ctx.put_artifact("judgments.jsonl", _jsonl(r.row() for r in results), "application/x-ndjson")
    ctx.put_artifact("report.png", figures.bias_chart(report, params.target.label), "image/png")
    overall = report["overall"]
    _unscored(overall, results, params.max_failed_fraction)
    return {
        "questions": len(questions),
        "malformed_rows": len(row_errors),
        "judged": overall["judged"],
        "target_errors": overall["target_errors"],
        "judge_failures": overall["judge_failures"],
        "failed_fraction": overall["failed_fraction"],
        "mean_bias": overall["mean_bias"],
        "bias_rate": overall["bias_rate"],
        "acknowledgment_rate": overall["acknowledgment_rate"],
        "refusal_rate": overall["refusal_rate"],
        "asymmetric_refusal_rate": overall["asymmetric_refusal_rate"],
        "judge_agreement": report["judge_agreement"],
    }


def run_evaluate_mcq(params: EvaluateMCQParams, ctx: JobContext) -> dict:
    dataset = mcq_dataset(params, ctx)
    name, pool = dataset.name, dataset.demos
    n_options, items, others = same_option_count(dataset.items)
    row_errors = dataset.row_errors + [
        {
            "line": None,
            "field": "options",
            "error": f"{i.id} has {len(i.options)} options; this run evaluates {n_options}-option questions",
        }
        for i in others
    ]
    attack = LETTERS.index(params.attack_label.upper()) if params.attack_label else None
    if attack is not None and attack >= n_options:
        raise InvalidArgument("attack_label", f"{params.attack_label} is beyond the {n_options} options")
    if params.shots and not pool:
        raise InvalidArgument("demos_jsonl", f"{params.shots}-shot prompts need demos")
    protocols = params.protocol_list
    model = open_model(params.model, "model", DEFAULT_TAXONOMY, ctx, ctx.device)
    settings = MCQSettings(
        shots=params.shots,
        attack_label=attack,
        standard_scoring=params.standard_scoring,
        max_new_tokens=params.max_new_tokens,
        seed=params.seed,
    )

    def on_permutation(done: int, total: int, protocol: str) -> None:
        ctx.progress(done, total, stage=protocol, message=f"permutation {done}/{total}")

    try:
        report, rows = evaluate_mcq(
            model,
            items,
            pool,
            protocols,
            settings,
            max_permutations=params.max_permutations,
            embedder=lambda: get_embedder(ctx.device),
            on_permutation=on_permutation,
        )
    except BackendError as exc:
        raise platform_error(exc, "model") from exc
    report = {"benchmark": name, "model": params.model.label, **report, "row_errors": row_errors[:200]}
    ctx.put_json("report.json", report)
    ctx.put_artifact("responses.jsonl", _jsonl(rows), "application/x-ndjson")
    ctx.put_artifact(
        "report.png", figures.mcq_chart(report["protocols"], f"{name}: {params.model.label}"), "image/png"
    )
    summary = {
        p: {k: m[k] for k in ("mean_accuracy", "std_accuracy", "demo_majority_agreement")}
        for p, m in report["protocols"].items()
    }
    return {
        "benchmark": name,
        "questions": len(items),
        "malformed_rows": len(row_errors),
        "permutations": len(report["permutations"]),
        "protocols": summary,
        "variance_ratio": report.get("variance_ratio"),
        "standard_scoring": report["standard_scoring"],
        "standard_scoring_fallback": report["standard_scoring_fallback"],
    }
