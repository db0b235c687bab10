"""Asking a target every variant of a question and having a judge compare the answers.

One question costs one target call per variant (the budget unit of CAB's search) and one or
more judge calls. A failing call is recorded on the question (with whether a retry might help)
instead of ending the run: a long audit against a remote model should survive a bad minute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from paperworks.services.bias.cab.judge import Verdict, judge
from paperworks.services.bias.cab.question import Question
from paperworks.shared.backends import BackendError, ChatMessage, ModelBackend


@dataclass(frozen=True)
class EvalSettings:
    judge_retries: int = 2
    max_new_tokens: int = 256
    judge_max_new_tokens: int = 400
    seed: int = 0


@dataclass(frozen=True)
class QuestionResult:
    question: Question
    answers: tuple[str, ...] | None
    verdict: Verdict | None
    target_calls: int
    judge_attempts: int = 0
    error: str = ""
    retryable: bool = False

    @property
    def judged(self) -> bool:
        return self.verdict is not None

    @property
    def failure(self) -> str:
        """Where an unscored question failed: "target" (no answers to judge), "judge" (answers,
        but no valid verdict), or "" when it was scored."""
        if self.verdict is not None:
            return ""
        return "target" if self.answers is None else "judge"

    def row(self) -> dict:
        return {
            **self.question.row(),
            "answers": list(self.answers) if self.answers is not None else None,
            "verdict": self.verdict.model_dump() if self.verdict else None,
            "judge_attempts": self.judge_attempts,
            "failure": self.failure,
            "error": self.error,
        }


def answer_variants(target: ModelBackend, question: Question, settings: EvalSettings) -> list[str]:
    return [
        target.chat(
            [ChatMessage("user", v)],
            max_new_tokens=settings.max_new_tokens,
            temperature=0.0,
            seed=settings.seed,
        ).text
        for v in question.variants
    ]


def evaluate_question(
    question: Question, target: ModelBackend, judge_model: ModelBackend, settings: EvalSettings
) -> QuestionResult:
    calls = len(question.variants)
    try:
        answers = answer_variants(target, question, settings)
    except BackendError as exc:
        return QuestionResult(
            question, None, None, calls, error=f"target: {exc.message}", retryable=exc.retryable
        )
    outcome = judge(
        judge_model,
        question,
        answers,
        retries=settings.judge_retries,
        max_new_tokens=settings.judge_max_new_tokens,
    )
    return QuestionResult(
        question,
        tuple(answers),
        outcome.verdict,
        calls,
        outcome.attempts,
        error=outcome.error and f"judge: {outcome.error}",
        retryable=outcome.retryable,
    )


def evaluate_questions(
    questions: Sequence[Question],
    target: ModelBackend,
    judge_model: ModelBackend,
    settings: EvalSettings,
    *,
    concurrency: int = 1,
    on_result: Callable[[int, QuestionResult], None] | None = None,
) -> list[QuestionResult]:
    """Results in the order of `questions`; `on_result(done_count, result)` after each one."""

    def run(q: Question) -> QuestionResult:
        return evaluate_question(q, target, judge_model, settings)

    results: list[QuestionResult] = []
    if concurrency <= 1 or len(questions) <= 1:
        for q in questions:
            results.append(run(q))
            if on_result:
                on_result(len(results), results[-1])
        return results
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for result in pool.map(run, questions):
            results.append(result)
            if on_result:
                on_result(len(results), result)
    return results


def rejudge(
    results: Sequence[QuestionResult], judge_model: ModelBackend, settings: EvalSettings
) -> list[Verdict | None]:
    """A second judge's verdicts on already-answered questions (None where it fails)."""
    return [
        judge(
            judge_model,
            r.question,
            list(r.answers),
            retries=settings.judge_retries,
            max_new_tokens=settings.judge_max_new_tokens,
        ).verdict
        if r.answers is not None
        else None
        for r in results
    ]
