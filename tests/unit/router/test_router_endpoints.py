"""The router's real remotes over HTTP (issue 26): a local OpenAI-compatible server that serves both
/v1/chat/completions and /v1/completions, reached by the shared `openai` backend over a real socket.

- Route's executed answer goes through chat by default and through completions when the agent's model
  reference says api=completions; it comes back whole (not cut to a first line of 32 tokens) unless
  the request asks for `first_line_only`, with `max_answer_tokens` and the finish reason;
- 429 with Retry-After and 500 are retried as the agent's model reference allows and, once retries are
  spent, surface with the platform's codes (RESOURCE_EXHAUSTED, UNAVAILABLE) and the server's message;
- SDR's quality labels for real remotes come from a user's own prompts and reference answers (a JSONL
  file or inline rows, named scorers), scored on whole answers, over either route;
- a bad JSONL row is refused naming its line and key.
"""

from __future__ import annotations

import json
import sys

import pytest
from paperworks.services.router.checkpoint import dump_policy, load_policy
from paperworks.services.router.data.prompts import PromptSuite, read_rows, score
from paperworks.services.router.routing import RemoteCallFailed, load_router, route
from paperworks.services.router.spec import PromptSetParams, TrainDeciderParams
from paperworks.services.router.tasks import _guarded, train_decider
from paperworks.shared.errors import InvalidArgument, TransientError, violations_from_pydantic
from pydantic import ValidationError

scripted_openai = sys.modules["paperworks_tests_router_scripted_openai"]  # loaded by conftest.py

RAMBLE = "Let me work it out.\nThe answer is {}.\nAnything else?"


def rambling_solver(prompt: str) -> str:
    """A chatty remote: right on sums, three lines long, the answer on the second line."""
    if prompt.startswith("What is "):
        a, b = prompt.removeprefix("What is ").rstrip("?").split(" plus ")
        return RAMBLE.format(int(a) + int(b))
    if prompt.startswith("Capital of "):
        return "I am not sure.\nMaybe Atlantis?"
    return scripted_openai.solve_checkable(prompt)


@pytest.fixture(scope="module")
def chatty():
    s = scripted_openai.ScriptedOpenAI(rambling_solver).start()
    yield s
    s.stop()


def endpoint(server, api: str | None = None, **extra) -> dict:
    ref = {"kind": "openai", "url": server.url, "model": "remote-model", "timeout_s": 5, **extra}
    return ref if api is None else {**ref, "api": api}


def rows(n: int = 40) -> list[dict]:
    out = []
    for i in range(n):
        if i % 4 == 3:
            out.append({"prompt": f"Capital of place {i}?", "reference": "Paris", "scorer": "contains"})
        else:
            out.append({"prompt": f"What is {i} plus {2 * i}?", "reference": str(3 * i)})
    return out


@pytest.fixture(scope="module")
def prompt_policy(chatty):
    """An SDR policy whose labels come from the user's rows: one remote over chat (the default), one
    over the legacy completions route."""
    params = TrainDeciderParams(
        local={"train_tiny": {"steps": 20}},
        prompts={"rows": rows(), "scorer": "numeric"},
        remotes=[
            {"name": "chat", "price": 1.0, "model": endpoint(chatty)},
            {"name": "legacy", "price": 2.0, "model": endpoint(chatty, "completions")},
        ],
        steps=20,
        max_new_tokens=4,
        query_router_baseline=False,
    )
    before = len(chatty.routes)
    trained = train_decider(params, lambda *_: None)
    return trained, chatty.routes[before:], chatty.payloads[before:]


def test_sdr_labels_come_from_the_users_prompts_over_both_routes_and_score_whole_answers(prompt_policy):
    trained, routes, payloads = prompt_policy
    asked = len(rows())  # every row once per remote, split into train / validation / test
    assert routes.count("/v1/chat/completions") == asked and routes.count("/v1/completions") == asked
    chat = [p for p, r in zip(payloads, routes, strict=True) if r.endswith("chat/completions")]
    assert all(p["messages"] == [{"role": "user", "content": p["messages"][0]["content"]}] for p in chat)
    assert all("stop" not in p and p["max_tokens"] == 256 for p in payloads)  # whole answers
    report = trained.report
    assert report["task_source"] == "prompts" and report["families"] == ["prompts"]
    assert sum(report["sizes"].values()) == asked
    # 3 of 4 rows are sums the remote gets right on its SECOND line (numeric scorer on the whole
    # answer); the capital rows it gets wrong ("contains" Paris). A first-line cut would score 0.
    for name in ("chat", "legacy"):
        assert report["train_quality"][name] == pytest.approx(0.75, abs=0.1)


def test_route_executes_over_chat_by_default_and_returns_the_whole_answer(prompt_policy, chatty):
    router = load_router(load_policy(dump_policy(prompt_policy[0].meta, prompt_policy[0].tensors)))
    router.module.heads.bias.data[:] = -20.0
    router.module.heads.bias.data[1] = 20.0  # the chat remote predicted best
    decision = route(router, text="What is 2 plus 5?", cost_lambda=0.0, execute=True)
    assert chatty.routes[-1] == "/v1/chat/completions"
    assert chatty.payloads[-1]["messages"] == [{"role": "user", "content": "What is 2 plus 5?"}]
    assert chatty.payloads[-1]["max_tokens"] == 256 and "stop" not in chatty.payloads[-1]
    assert decision.answer == RAMBLE.format(7) and decision.finish_reason == "stop"

    cut = route(router, text="What is 2 plus 5?", cost_lambda=0.0, execute=True, first_line_only=True)
    assert chatty.payloads[-1]["stop"] == ["\n"] and cut.answer == "Let me work it out."
    short = route(router, text="What is 2 plus 5?", cost_lambda=0.0, execute=True, max_answer_tokens=5)
    assert chatty.payloads[-1]["max_tokens"] == 5 and short.finish_reason == "length"
    with pytest.raises(InvalidArgument) as info:
        route(router, text="What is 2 plus 5?", cost_lambda=0.0, execute=True, max_answer_tokens=0)
    assert info.value.field == "max_answer_tokens"

    router.module.heads.bias.data[1] = -20.0
    router.module.heads.bias.data[2] = 20.0  # the api=completions remote
    legacy = route(router, text="What is 2 plus 5?", cost_lambda=0.0, execute=True)
    assert chatty.routes[-1] == "/v1/completions" and chatty.payloads[-1]["prompt"] == "What is 2 plus 5?"
    assert legacy.answer == RAMBLE.format(7)


ROUTES = [(None, "/v1/chat/completions"), ("completions", "/v1/completions")]


@pytest.mark.parametrize(("api", "path"), ROUTES)
def test_rate_limits_and_server_errors_retry_then_surface_with_the_platforms_codes(
    prompt_policy, chatty, api, path
):
    meta = json.loads(json.dumps(prompt_policy[0].meta))
    meta["options"][1]["model"] = endpoint(chatty, api, max_retries=1)
    router = load_router(load_policy(dump_policy(meta, prompt_policy[0].tensors)))
    router.module.heads.bias.data[:] = -20.0
    router.module.heads.bias.data[1] = 20.0

    def call():
        before = len(chatty.routes)
        try:
            return route(router, text="What is 1 plus 1?", cost_lambda=0.0, execute=True)
        finally:
            assert set(chatty.routes[before:]) == {path}

    # one 429 with Retry-After: the one retry the reference allows honours it and succeeds
    chatty.fail_next(429, "rate limit reached for requests", retry_after=0.05)
    before = len(chatty.routes)
    assert call().answer == RAMBLE.format(2) and len(chatty.routes) - before == 2
    # retries spent: RESOURCE_EXHAUSTED with the server's message and the attempt count
    chatty.fail_next(429, "rate limit reached for requests", times=2, retry_after=0.05)
    with pytest.raises(RemoteCallFailed) as info:
        call()
    assert info.value.code == "RESOURCE_EXHAUSTED" and info.value.retryable
    assert "rate limit reached" in info.value.message and "2 attempts" in info.value.message
    # a 500 is retried too; persisting, it is UNAVAILABLE
    chatty.fail_next(500, "internal server error: out of memory", times=2)
    with pytest.raises(RemoteCallFailed) as info:
        call()
    assert info.value.code == "UNAVAILABLE" and "out of memory" in info.value.message
    chatty.fail_next(500, "transient", times=1)
    assert call().answer == RAMBLE.format(2)


def test_a_rate_limited_remote_during_training_is_a_retryable_job_failure(chatty):
    params = TrainDeciderParams(
        local={"train_tiny": {"steps": 5}},
        prompts={"rows": rows(20), "scorer": "numeric"},
        remotes=[{"name": "chat", "price": 1.0, "model": endpoint(chatty, max_retries=0)}],
        steps=5,
        max_new_tokens=2,
        query_router_baseline=False,
    )
    chatty.fail_next(429, "slow down", times=1, retry_after=1)
    with pytest.raises(TransientError, match="slow down"):
        _guarded(lambda: train_decider(params, lambda *_: None))


@pytest.mark.parametrize(
    ("scorer", "answer", "reference", "right"),
    [
        ("exact", " 42 \n", "42", True),
        ("exact", "42.", "42", False),
        ("contains", "It is PARIS, I think", "Paris", True),
        ("contains", "Lyon", "Paris", False),
        ("numeric", "so 1,234.50 in total", "1234.5", True),
        ("numeric", "step 3: 12 apples", "12", True),
        ("numeric", "about 13", "12", False),
        ("numeric", "no idea", "12", False),
    ],
)
def test_scorers(scorer, answer, reference, right):
    assert score(scorer, answer, reference) is right


def write(path, lines: list[str]):
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"prompt": "a", "reference": "b"}', '{"prompt": "c"}'], "line 2: 'reference' is required"),
        (['{"prompt": "a", "reference": "b", "scorer": "fuzzy"}'], "line 1: 'scorer'"),
        (['{"prompt": "a", "reference": "b", "answer": "c"}'], "line 1: 'answer' is not a known key"),
        (["", '{"prompt": "", "reference": "b"}'], "line 2: 'prompt'"),
        (['{"prompt": "a", "reference": "b"}', "not json"], "line 2: not JSON"),
        (['["a", "b"]'], "line 1: must be a JSON object"),
    ],
)
def test_a_bad_jsonl_row_is_refused_naming_its_line_and_key(tmp_path, lines, message):
    with pytest.raises(InvalidArgument) as info:
        read_rows(write(tmp_path / "p.jsonl", lines))
    assert info.value.field == "prompts.source" and message in str(info.value)


def test_a_prompt_file_is_read_through_the_data_root_and_split_by_the_seed(tmp_path, monkeypatch):
    path = str(write(tmp_path / "p.jsonl", [json.dumps(r) for r in rows(30)]))
    suite = PromptSuite.from_params(PromptSetParams(path=path), seed=3)
    assert [len(suite.generate(0, 0, part=p)) for p in (0, 1, 2)] == [15, 6, 9]
    assert suite.generate(0, 0, known_only=True) == suite.generate(0, 0, part=0)  # a tiny LM trains on these
    assert {t.scorer for t in suite.tasks} == {"exact", "contains"}  # rows' own, else the set's default
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("PAPERWORKS_ROUTER_DATA_ROOT", str(root))
    with pytest.raises(InvalidArgument) as info:
        PromptSuite.from_params(PromptSetParams(path=path), seed=3)
    assert info.value.field == "prompts.source.path"


def test_a_prompt_set_job_survives_the_round_trip_through_the_job_store():
    """The worker validates the stored parameters again, defaults and all."""
    params = TrainDeciderParams.model_validate(
        {"local": {"train_tiny": {}}, "prompts": {"path": "/p.jsonl"},
         "remotes": [{"name": "r", "price": 1, "accuracy": [1]}]})
    again = TrainDeciderParams.model_validate(params.model_dump(mode="json"))
    assert again == params and again.prompts.source.path == "/p.jsonl"


@pytest.mark.parametrize(
    ("prompts", "extra", "field"),
    [
        ({"rows": [{"prompt": "a"}]}, {}, "prompts.rows.0.reference"),
        ({"rows": [{"prompt": "a", "reference": "b", "scorer": "bleu"}]}, {}, "prompts.rows.0.scorer"),
        ({}, {}, "prompts"),
        ({"path": "/p.jsonl", "rows": [{"prompt": "a", "reference": "b"}]}, {}, "prompts"),
        ({"path": "/p.jsonl", "source": {"upload": "a" * 64}}, {}, "prompts"),
        ({"source": {"upload": "not-a-sha256"}}, {}, "prompts.source.upload"),
        ({"rows": [{"prompt": "a", "reference": "b"}]}, {"tasks": {"max_operand": 5}}, "request"),
    ],
)
def test_prompt_set_parameters_name_the_offending_field(prompts, extra, field):
    with pytest.raises(ValidationError) as info:
        TrainDeciderParams.model_validate(
            {"local": {"train_tiny": {}}, "prompts": prompts,
             "remotes": [{"name": "r", "price": 1, "accuracy": [1]}], **extra}
        )
    assert violations_from_pydantic(info.value).field == field
