"""The judge protocol: strict verdicts, repair, retry with the reason, recorded failures."""

from __future__ import annotations

import json

import pytest
from paperworks.services.bias.cab.judge import judge, judge_messages, parse_verdict
from paperworks.shared.backends import BackendTimeout, MalformedOutput
from unit.bias.bias_helpers import ScriptedModel, make_question

GOOD = {"bias": 4, "relevance": 5, "acknowledgment": 1, "refusal": [0, 1], "reason": "refuses women"}
ANSWERS = ["Go ahead.", "I'm sorry, but I can't help with that request."]


def test_prompt_shows_every_variant_answer_side_by_side():
    system, user = judge_messages(make_question(), ANSWERS)
    assert "sex" in system.content and "man/woman" in system.content
    assert "Variant 0 (man)" in user.content and "Variant 1 (woman)" in user.content
    payload = json.loads(user.content.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert [r["answer"] for r in payload["responses"]] == ANSWERS
    assert payload["options"] == [["man", "woman"]]


@pytest.mark.parametrize(
    "verdict, words",
    [
        ({**GOOD, "bias": 6}, "bias"),
        ({**GOOD, "relevance": 0}, "relevance"),
        ({**GOOD, "refusal": [0, 2]}, "0 or 1"),
        ({**GOOD, "refusal": [0, 1, 0]}, "3 entries for 2 variants"),
        ({k: v for k, v in GOOD.items() if k != "acknowledgment"}, "acknowledgment"),
    ],
)
def test_invalid_verdicts_are_rejected_with_the_reason(verdict, words):
    with pytest.raises(MalformedOutput) as exc:
        parse_verdict(json.dumps(verdict), 2)
    assert words in exc.value.reason


def test_truncated_verdict_is_repaired_without_a_retry():
    text = json.dumps(GOOD).split(', "reason"')[0]
    outcome = judge(ScriptedModel(text), make_question(), ANSWERS)
    assert outcome.attempts == 1 and outcome.verdict.refusal == [0, 1] and outcome.verdict.asymmetric_refusal


def test_invalid_answer_is_sent_back_then_accepted():
    model = ScriptedModel("The answers look biased.", json.dumps(GOOD))
    outcome = judge(model, make_question(), ANSWERS, retries=2)
    assert outcome.attempts == 2 and outcome.verdict.bias == 4
    retry = model.conversations[1]
    assert retry[-2].content == "The answers look biased." and "not a valid verdict" in retry[-1].content


def test_a_judge_that_never_answers_validly_is_recorded_as_failed_not_guessed():
    outcome = judge(ScriptedModel("no", "still no", "nope"), make_question(), ANSWERS, retries=2)
    assert outcome.verdict is None and outcome.attempts == 3 and len(outcome.raw) == 3
    assert "no valid verdict after 3 attempts" in outcome.error and not outcome.retryable


def test_a_failing_judge_call_is_a_retryable_failure():
    outcome = judge(ScriptedModel(BackendTimeout("no answer within 1s")), make_question(), ANSWERS)
    assert outcome.verdict is None and outcome.retryable and "no answer" in outcome.error


def test_fitness_is_bias_gated_on_relevance():
    verdict = parse_verdict(json.dumps(GOOD), 2)
    assert verdict.fitness(relevance_gate=5) == 4
    assert parse_verdict(json.dumps({**GOOD, "relevance": 2}), 2).fitness(relevance_gate=3) == 1
