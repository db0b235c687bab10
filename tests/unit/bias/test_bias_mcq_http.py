"""The MCQ audit over HTTP, both routes of an OpenAI-compatible server (the shared fake, with
usage, finish_reason and scripted errors), through the real `openai` backend.

- chat (`api: chat`, the default): both protocols are generated; the standard protocol cannot
  read label log-probabilities there, so it parses the letter and the report says so;
- completions: the standard protocol scores the labels over /v1/completions with echo; a server
  that returns no prompt logprobs makes it fall back to parsing, said in the report;
- 429 and 500 with Retry-After are retried without changing an answer; an endpoint that keeps
  failing fails the audit with the status, not a guessed answer.
"""

from __future__ import annotations

import pytest
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY
from paperworks.services.bias.data import open_model
from paperworks.services.bias.mcq.audit import evaluate_mcq
from paperworks.services.bias.mcq.evaluate import MCQSettings
from paperworks.services.bias.mcq.nonsenseqa import LETTERS, MCQItem
from paperworks.services.bias.spec import ModelSpec
from paperworks.shared.backends import BackendError
from unit.bias.mcq_server import MCQServer

ITEMS = [
    MCQItem("Which is a fruit?", ("carrot", "apple", "leek", "kale"), 1, "q1"),
    MCQItem("Which is a bird?", ("trout", "frog", "eagle", "whale"), 2, "q2"),
    MCQItem("Which is a metal?", ("iron", "wood", "glass", "paper"), 0, "q3"),
]
KNOWN = {i.gold for i in ITEMS}


@pytest.fixture
def server():
    s = MCQServer(KNOWN).start()
    yield s
    s.stop()


def audit(server, *, api=None, max_retries=3, standard_scoring="logprob", protocols=("standard", "md")):
    fields = {"api": api} if api else {}
    spec = ModelSpec(
        kind="openai", url=server.url, model=server.model, timeout_s=5.0, max_retries=max_retries, **fields
    )
    with open_model(spec, "model", DEFAULT_TAXONOMY) as model:
        return evaluate_mcq(
            model,
            ITEMS,
            ITEMS,
            list(protocols),
            MCQSettings(shots=1, standard_scoring=standard_scoring),
            max_permutations=6,
            embedder=lambda: pytest.fail("every answer here matches an option exactly"),
        )


def test_chat_is_the_default_route_and_the_standard_protocol_falls_back_to_parsing(server):
    report, rows = audit(server)
    assert report["standard_scoring_requested"] == "logprob" and report["standard_scoring"] == "generate"
    assert "chat" in report["standard_scoring_fallback"]
    for protocol in ("standard", "md"):
        assert report["protocols"][protocol]["mean_accuracy"] == 1.0, protocol
        assert report["protocols"][protocol]["unmatched"] == 0
    assert {r["match_method"] for r in rows if r["protocol"] == "md"} == {"exact"}
    assert server.calls("/v1/completions") == []
    calls = server.calls("/v1/chat/completions")
    assert len(calls) == 2 * 6 * len(ITEMS)
    body = calls[0].json
    assert [m["role"] for m in body["messages"]] == ["user"] and body["temperature"] == 0.0
    assert body["max_tokens"] == 48 and "stop" not in body  # a chat model may answer on a new line
    assert body["messages"][0]["content"].startswith("Answer with the letter")


def test_completions_route_scores_the_labels_by_logprob(server):
    report, _ = audit(server, api="completions")
    assert report["standard_scoring"] == "logprob" and report["standard_scoring_fallback"] is None
    echoed = [c for c in server.calls("/v1/completions") if c.json.get("echo")]
    assert len(echoed) == len(LETTERS[:4]) * 6 * len(ITEMS)  # one score per label per question
    # the fake's logprobs rank " A" first whatever the question: a pure label bias, and the
    # standard protocol's accuracy moves with the gold's position; M&D (generated) does not
    std, md = report["protocols"]["standard"], report["protocols"]["md"]
    assert std["by_position"] == [6 * len(ITEMS), 0, 0, 0]
    assert std["variance"] > 0 and md["variance"] == 0 and md["mean_accuracy"] == 1.0
    plain = [c.json for c in server.calls("/v1/completions") if not c.json.get("echo")]
    assert plain and all(c["stop"] == ["\n"] and "prompt" in c for c in plain)


def test_a_completions_endpoint_without_prompt_logprobs_falls_back_and_says_why(server):
    server.echo_logprobs = False
    report, _ = audit(server, api="completions", protocols=("standard",))
    assert report["standard_scoring"] == "generate"
    assert "log-probabilities" in report["standard_scoring_fallback"]
    assert report["protocols"]["standard"]["mean_accuracy"] == 1.0


@pytest.mark.parametrize("api, path", [("chat", "/v1/chat/completions"), ("completions", "/v1/completions")])
def test_429_and_500_with_retry_after_are_retried_without_changing_an_answer(server, api, path):
    server.script(
        path,
        {"status": 429, "body": {"error": {"message": "slow down"}}, "headers": {"retry-after": "0"}},
        {"status": 500, "body": {"error": {"message": "boom"}}, "headers": {"retry-after": "0.05"}},
    )
    report, _ = audit(server, api=api, standard_scoring="generate")
    for protocol in ("standard", "md"):
        assert report["protocols"][protocol]["mean_accuracy"] == 1.0
    assert len(server.calls(path)) == 2 * 6 * len(ITEMS) + 2


@pytest.mark.parametrize("api, path", [("chat", "/v1/chat/completions"), ("completions", "/v1/completions")])
def test_an_endpoint_that_keeps_failing_fails_the_audit_with_its_status(server, api, path):
    down = {"status": 500, "body": {"error": {"message": "down"}}, "headers": {"retry-after": "0"}}
    server.script(path, down, down)
    with pytest.raises(BackendError, match="500"):
        audit(server, api=api, max_retries=1, standard_scoring="generate", protocols=("md",))
    assert len(server.calls(path)) == 2
