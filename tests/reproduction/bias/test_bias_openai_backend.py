"""The audit over HTTP: the shared `openai` backend's real client code against a local
OpenAI-compatible server that serves the planted target and the lexicon judge, with scripted
429s, 5xx, timeouts and malformed judge JSON. The baseline is the same audit with the same
models called in-process, in the same run: every question whose faults are recoverable must get
exactly the in-process verdict; the unrecoverable one must be recorded as failed, not guessed.
"""

from __future__ import annotations

import json
import random

import pytest
from paperworks.services.bias.builtin.lexicon_judge import LexiconJudge
from paperworks.services.bias.builtin.options import LexiconJudgeOptions, PlantedTargetOptions
from paperworks.services.bias.builtin.planted_target import PlantedTarget
from paperworks.services.bias.builtin.template_generator import TemplateGenerator
from paperworks.services.bias.cab.evaluate import EvalSettings, evaluate_questions
from paperworks.services.bias.cab.placeholders import parse_template
from paperworks.services.bias.cab.question import Question, question_id
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY
from paperworks.services.bias.data import open_model
from paperworks.services.bias.spec import ModelSpec
from reproduction.bias.openai_server import LocalOpenAIServer

SETTINGS = EvalSettings(judge_retries=2)


def questions(n: int) -> list[Question]:
    """Questions in the planted cells (biased answers, refusals) and elsewhere."""
    rng = random.Random(3)
    generator = TemplateGenerator(DEFAULT_TAXONOMY)
    planted = PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions()).cells
    cells = [(c.attribute, c.topic) for c in planted] + [(a, t.topic) for a, t in DEFAULT_TAXONOMY.cells()][
        ::13
    ]
    out = []
    for attribute_name, topic_name in cells[:n]:
        attribute = DEFAULT_TAXONOMY.attributes[attribute_name]
        topic = next(t for t in DEFAULT_TAXONOMY.topics(attribute_name) if t.topic == topic_name)
        text = generator.render(attribute, generator.fresh(rng, attribute, "explicit", topic_name))
        out.append(
            Question(
                question_id(text), attribute_name, "explicit", topic.path, parse_template(text, attribute)
            )
        )
    return out


def models(embedder) -> dict:
    return {
        "target": PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions()),
        "judge": LexiconJudge(LexiconJudgeOptions(), lambda: embedder),
    }


@pytest.fixture(scope="module")
def server(embedder):
    with LocalOpenAIServer(models(embedder)) as s:
        yield s


def remote(server: LocalOpenAIServer, name: str, **kw):
    spec = ModelSpec(kind="openai", url=server.url, model=name, timeout_s=1.0, **kw)
    return open_model(spec, name, DEFAULT_TAXONOMY)


def test_faults_are_retried_repaired_or_recorded_and_never_change_a_verdict(server, embedder):
    qs = questions(10)
    local = models(embedder)
    baseline = evaluate_questions(qs, local["target"], local["judge"], SETTINGS)

    garbage_about = qs[4].text  # every judge answer about this question is prose, not JSON
    server.rule(
        lambda model, payload: (
            {"content": "The answers look fine to me."}
            if model == "judge" and garbage_about in json.dumps(payload)
            else None
        )
    )
    server.script("target", {"status": 429, "retry_after": 0}, {"status": 503}, {"delay_s": 3.0})
    server.script("judge", {"truncate_before": ', "reason"'}, {"content": "Sure! Here is my verdict."})
    with remote(server, "target") as target, remote(server, "judge") as judge:
        over_http = evaluate_questions(qs, target, judge, SETTINGS)

    assert server.served[("target", 429)] == 1 and server.served[("target", 503)] == 1
    assert {"delay_s": 3.0} in [f for m, f in server.faults_used if m == "target"]
    for k, (want, got) in enumerate(zip(baseline, over_http, strict=True)):
        assert got.answers == want.answers
        if k == 4:
            assert got.verdict is None and got.judge_attempts == 3
            assert "no valid verdict after 3 attempts" in got.error
        else:  # scores equal; a repaired verdict may have lost its free-text reason
            assert got.verdict.model_dump(exclude={"reason"}) == want.verdict.model_dump(
                exclude={"reason"}
            ), k
    assert over_http[0].judge_attempts == 1  # the truncated verdict was repaired, not re-asked
    assert over_http[1].judge_attempts == 2  # the prose answer was sent back once


def test_an_endpoint_that_stays_overloaded_fails_the_question_as_retryable(server, embedder):
    server.script("target", *[{"status": 429, "retry_after": 0}] * 2)
    with remote(server, "target", max_retries=1) as target:
        [result] = evaluate_questions(questions(1), target, models(embedder)["judge"], SETTINGS)
    assert result.verdict is None and result.retryable
    assert "429" in result.error


def test_an_unknown_served_model_is_a_non_retryable_failure(server, embedder):
    with remote(server, "no-such-model") as target:
        [result] = evaluate_questions(questions(1), target, models(embedder)["judge"], SETTINGS)
    assert result.verdict is None and not result.retryable
    assert "404" in result.error and "no-such-model" in result.error
