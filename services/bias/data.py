"""The bias service's inputs: the models a job names, the CAB benchmark it audits, the MCQ
questions it asks.

- Models. A `ModelSpec` is either a shared backend (`paperworks.shared.backends`: an
  OpenAI-compatible endpoint, or an `hf` / `tiny` directory on the server, which must lie under
  `PAPERWORKS_BIAS_DATA_ROOT` when that is set) or one of the models defined in code
  (`builtin/`). The built-in models are bound to the job's taxonomy, so planted cells and
  generated questions use the same attributes and topics as the search.
- The benchmark of an evaluate_bias job: inline JSONL, or the `benchmark.jsonl` of the tenant's
  finished generate_benchmark job.
- The questions of an evaluate_mcq job: JSONL rows `{"question": str, "options": [str, ...],
  "answer": index | letter | option text}` (a malformed row is reported with its line number
  and field and the rest still run), or generated NonsenseQA.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from paperworks.services.bias.builtin.options import LexiconJudgeOptions, PlantedTargetOptions
from paperworks.services.bias.cab.taxonomy import Taxonomy
from paperworks.services.bias.mcq.nonsenseqa import LETTERS, MCQItem, nonsense_qa
from paperworks.services.bias.spec import EvaluateBiasParams, EvaluateMCQParams, ModelSpec
from paperworks.shared.backends import BackendError, ModelBackend, load_backend, platform_error
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import server_path

if TYPE_CHECKING:
    from paperworks.shared.tasks.context import JobContext

BENCHMARK_ARTIFACT = "benchmark.jsonl"


def open_model(spec: ModelSpec, role: str, taxonomy: Taxonomy) -> ModelBackend:
    """The backend for `spec`; `role` ('target', 'judge', ...) names the field in errors."""
    if spec.kind == "builtin":
        return builtin_model(spec, taxonomy)
    try:
        ref = spec.ref()
        if ref.kind in ("hf", "tiny"):
            ref = dataclasses.replace(ref, path=str(server_path(ref.path, "bias", f"{role}.path")))
        return load_backend(ref)
    except BackendError as exc:
        raise platform_error(exc, role) from exc


def builtin_model(spec: ModelSpec, taxonomy: Taxonomy) -> ModelBackend:
    """The model defined in code that `spec.builtin` names, with its validated `options`."""
    if spec.builtin == "planted-target":
        from paperworks.services.bias.builtin.planted_target import PlantedTarget

        return PlantedTarget(taxonomy, PlantedTargetOptions.model_validate(spec.options))
    if spec.builtin == "lexicon-judge":
        from paperworks.services.bias.builtin.lexicon_judge import LexiconJudge
        from paperworks.services.bias.embedder import get_embedder

        return LexiconJudge(LexiconJudgeOptions.model_validate(spec.options), get_embedder)
    from paperworks.services.bias.builtin.template_generator import TemplateGenerator

    return TemplateGenerator(taxonomy)


def benchmark_text(params: EvaluateBiasParams, ctx: JobContext) -> str:
    """The benchmark JSONL: inline, or the tenant's SUCCEEDED generate_benchmark job's."""
    if params.benchmark_jsonl.strip():
        return params.benchmark_jsonl
    data, _ = ctx.job_artifact(
        "bias", params.source_job_id, BENCHMARK_ARTIFACT, "source_job_id", kind="generate_benchmark"
    )
    return data.decode()


@dataclass(frozen=True)
class MCQDataset:
    name: str
    items: list[MCQItem]
    demos: list[MCQItem]  # the pool few-shot prompts draw from
    row_errors: list[dict]


def mcq_dataset(params: EvaluateMCQParams) -> MCQDataset:
    """Generated NonsenseQA (its demo pool drawn with seed + 1), or the inline JSONL rows (the
    demos from `demos_jsonl`, else the dataset itself)."""
    if params.nonsenseqa is not None:
        cfg = params.nonsenseqa
        shape = {
            "n_options": cfg.n_options,
            "question_words": cfg.question_words,
            "option_words": cfg.option_words,
        }
        return MCQDataset(
            params.name or "nonsenseqa",
            nonsense_qa(cfg.n_questions, seed=cfg.seed, **shape),
            nonsense_qa(cfg.n_demos, seed=cfg.seed + 1, **shape),
            [],
        )
    items, row_errors = read_mcq_jsonl(params.dataset_jsonl)
    if not items:
        first = row_errors[0] if row_errors else {"line": 0, "field": "row", "error": "empty"}
        raise InvalidArgument(
            "dataset_jsonl", f"no valid rows (line {first['line']}, {first['field']}: {first['error']})"
        )
    demos, demo_errors = read_mcq_jsonl(params.demos_jsonl) if params.demos_jsonl.strip() else (items, [])
    row_errors += [{**e, "field": f"demos.{e['field']}"} for e in demo_errors]
    return MCQDataset(params.name or "dataset", items, demos, row_errors)


class RowError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message


def item_from_row(row: object, index: int) -> MCQItem:
    if not isinstance(row, dict):
        raise RowError("row", f"expected a JSON object, got {type(row).__name__}")
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RowError("question", "a non-empty string is required")
    options = row.get("options")
    if not isinstance(options, list) or len(options) < 2 or len(options) > len(LETTERS):
        raise RowError("options", f"a list of 2..{len(LETTERS)} strings is required")
    if not all(isinstance(o, str) and o.strip() for o in options):
        raise RowError("options", "every option must be a non-empty string")
    if len({o.strip().lower() for o in options}) != len(options):
        raise RowError("options", "options must be distinct")
    return MCQItem(
        question.strip(),
        tuple(o.strip() for o in options),
        _answer_index(row.get("answer"), options),
        str(row.get("id") or f"row-{index}"),
    )


def _answer_index(answer: object, options: list[str]) -> int:
    n = len(options)
    if isinstance(answer, bool):
        raise RowError("answer", "must be an index, a letter or an option's text")
    if isinstance(answer, int):
        if not 0 <= answer < n:
            raise RowError("answer", f"index {answer} is out of range for {n} options")
        return answer
    if isinstance(answer, str):
        if len(answer) == 1 and answer.upper() in LETTERS[:n]:
            return LETTERS.index(answer.upper())
        for i, option in enumerate(options):
            if option.strip() == answer.strip():
                return i
        raise RowError("answer", f"{answer!r} is neither a letter A..{LETTERS[n - 1]} nor an option")
    raise RowError("answer", "must be an index, a letter or an option's text")


def read_mcq_jsonl(text: str) -> tuple[list[MCQItem], list[dict]]:
    """(items, errors): every valid row, and {line, field, error} for each malformed one."""
    items, errors = [], []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items.append(item_from_row(row, line_no))
        except json.JSONDecodeError as exc:
            errors.append(
                {"line": line_no, "field": "row", "error": f"not JSON: {exc.msg} at char {exc.pos}"}
            )
        except RowError as exc:
            errors.append({"line": line_no, "field": exc.field, "error": exc.message})
    return items, errors
