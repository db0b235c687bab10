"""The openai backend against a live local server: happy paths, retries and every failure mode."""

from __future__ import annotations

import socket
import time

import pytest
from paperworks.shared.backends import (
    BackendTimeout,
    BackendUnavailable,
    InvalidModel,
    MalformedResponse,
    ModelRef,
    RemoteError,
    Unsupported,
    load_backend,
    parse_json_answer,
)
from paperworks.shared.backends.openai import OpenAIBackend

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"


@pytest.fixture
def backend(openai_server):
    """The legacy completions route (the generate/score tests below); chat-route generate has
    its own tests."""
    with OpenAIBackend(
        openai_server.url, "fake-model", timeout_s=2.0, max_retries=2, backoff_s=0.001, api="completions"
    ) as client:
        yield client


@pytest.fixture
def chat_backend(openai_server):
    with load_backend(ModelRef(kind="openai", url=openai_server.url, model="fake-model",
                               max_retries=2)) as client:
        yield client


def test_generate_speaks_chat_completions_by_default(openai_server, chat_backend):
    gens = chat_backend.generate(["2+2=", "capital of France?"], max_new_tokens=40, temperature=0.2,
                                 stop=["France"])
    assert [g.text for g in gens] == ["echo: 2+2=", "echo: capital of "]
    assert gens[0].logprobs == pytest.approx([openai_server.char_logprob(c) for c in "echo: 2+2="])
    calls = sorted(openai_server.calls(CHAT), key=lambda c: c.json["messages"][0]["content"])
    assert calls[0].json["messages"] == [{"role": "user", "content": "2+2="}]
    first = calls[0].json
    assert (first["max_tokens"], first["temperature"], first["logprobs"]) == (40, 0.2, True)
    assert calls[1].json["stop"] == ["France"] and openai_server.calls(COMPLETIONS) == []


def test_chat_generate_without_logprobs_from_the_endpoint_says_none(openai_server, chat_backend):
    openai_server.script(CHAT, {"body": {"choices": [{"message": {"role": "assistant", "content": "4"},
                                                      "finish_reason": "length"}]}})
    [gen] = chat_backend.generate(["2+2="])
    assert (gen.text, gen.logprobs, gen.finish_reason) == ("4", None, "length")


def test_chat_generate_retries_429_and_500_with_retry_after(openai_server, chat_backend):
    openai_server.script(
        CHAT,
        {"status": 429, "body": {"error": {"message": "slow down"}}, "headers": {"Retry-After": "0.2"}},
        {"status": 500, "body": {"error": {"message": "hiccup"}}, "headers": {"Retry-After": "0"}},
    )
    start = time.monotonic()
    [gen] = chat_backend.generate(["hi"])
    assert time.monotonic() - start >= 0.2
    assert gen.text == "echo: hi" and len(openai_server.calls(CHAT)) == 3


def test_the_api_field_is_checked():
    with pytest.raises(InvalidModel) as exc:
        ModelRef(kind="openai", url="http://h:1/v1", model="m", api="legacy")
    assert exc.value.field == "api"


def test_chat_sends_openai_payload_and_key_from_env(openai_server, monkeypatch):
    openai_server.api_key = "sk-test"
    monkeypatch.setenv("PAPERWORKS_TEST_KEY", "sk-test")
    ref = ModelRef(
        kind="openai", url=openai_server.url, model="fake-model", api_key_env="PAPERWORKS_TEST_KEY"
    )
    with load_backend(ref) as client:
        answer = client.chat(
            [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
            max_new_tokens=50, temperature=0.7, seed=3, logprobs=True,
        )  # fmt: skip
    assert answer.text == "echo: hi" and answer.finish_reason == "stop"
    assert answer.logprobs == pytest.approx([openai_server.char_logprob(c) for c in "echo: hi"])
    (call,) = openai_server.calls(CHAT)
    assert call.headers["authorization"] == "Bearer sk-test"
    assert call.json["model"] == "fake-model"
    assert call.json["messages"][1] == {"role": "user", "content": "hi"}
    assert (call.json["temperature"], call.json["max_tokens"], call.json["seed"]) == (0.7, 50, 3)


def test_wrong_api_key_is_unauthenticated_and_not_retried(openai_server, backend):
    openai_server.api_key = "other"
    with pytest.raises(RemoteError) as info:
        backend.chat([{"role": "user", "content": "hi"}])
    assert info.value.status == 401 and info.value.grpc_code_name == "UNAUTHENTICATED"
    assert "invalid api key" in str(info.value)
    assert len(openai_server.requests) == 1


def test_json_mode_asks_for_a_json_object(openai_server, backend):
    answer = backend.chat([{"role": "user", "content": "q"}], json_mode=True)
    assert parse_json_answer(answer.text) == {"echo": "q"}
    assert openai_server.calls(CHAT)[0].json["response_format"] == {"type": "json_object"}


def test_generate_returns_text_tokens_logprobs_in_prompt_order(openai_server, backend):
    prompts = [f"prompt {i}" for i in range(6)]
    gens = backend.generate(prompts, max_new_tokens=4, stop=["zz"])
    assert [g.text for g in gens] == [(f"t {i}" * 2)[:4] for i in range(6)]
    assert gens[0].logprobs == pytest.approx([openai_server.char_logprob(c) for c in gens[0].text])
    assert gens[0].finish_reason == "length" and gens[0].token_ids is None
    assert all(c.json["stop"] == ["zz"] and c.json["logprobs"] == 1 for c in openai_server.calls(COMPLETIONS))


def test_generate_zero_tokens_makes_no_request(openai_server, backend):
    assert backend.generate(["x"], max_new_tokens=0)[0].text == ""
    assert openai_server.requests == []


def test_score_uses_echo_logprobs_of_the_continuation(openai_server, backend):
    (score,) = backend.score(["The answer is"], [" 42"])
    assert score.tokens == [" ", "4", "2"]
    assert score.total == pytest.approx(sum(openai_server.char_logprob(c) for c in " 42"))
    call = openai_server.calls(COMPLETIONS)[0].json
    assert call["echo"] is True and call["prompt"] == "The answer is 42"


def test_score_without_server_support_is_unsupported(openai_server, backend):
    openai_server.script(COMPLETIONS, {"body": {"choices": [{"text": "x", "logprobs": None}]}})
    with pytest.raises(Unsupported) as info:
        backend.score(["a"], ["b"])
    assert info.value.grpc_code_name == "FAILED_PRECONDITION" and "echo" in str(info.value)


def test_hidden_states_are_unsupported(backend):
    assert not backend.supports("hidden_states")
    with pytest.raises(Unsupported):
        backend.hidden_states(["x"])


def test_list_models(backend):
    assert backend.list_models() == ["fake-model"]


def test_unknown_model_is_not_found_with_server_message(backend):
    backend.model = "nope"
    with pytest.raises(RemoteError) as info:
        backend.chat([{"role": "user", "content": "hi"}])
    assert info.value.grpc_code_name == "NOT_FOUND"
    assert "The model `nope` does not exist." in str(info.value)


def test_429_is_retried_honouring_retry_after(openai_server, backend):
    openai_server.script(
        CHAT,
        {
            "status": 429,
            "body": {"error": {"message": "slow down"}},
            "headers": {"Retry-After": "0.3"},
        },
    )
    start = time.monotonic()
    answer = backend.chat([{"role": "user", "content": "hi"}])
    assert time.monotonic() - start >= 0.3
    assert answer.text == "echo: hi" and len(openai_server.calls(CHAT)) == 2


def test_5xx_exhausts_retries_with_precise_error(openai_server, backend):
    error = {"status": 503, "body": {"error": {"message": "engine overloaded"}}}
    openai_server.script(CHAT, error, error, error)
    with pytest.raises(RemoteError) as info:
        backend.chat([{"role": "user", "content": "hi"}])
    err = info.value
    assert err.status == 503 and err.retryable and err.grpc_code_name == "UNAVAILABLE"
    assert "engine overloaded" in err.message and "3 attempts" in err.message
    assert "engine overloaded" in err.body
    assert len(openai_server.calls(CHAT)) == 3


def test_400_is_not_retried(openai_server, backend):
    openai_server.script(CHAT, {"status": 400, "body": {"detail": "max_tokens too large"}})
    with pytest.raises(RemoteError) as info:
        backend.chat([{"role": "user", "content": "hi"}])
    assert info.value.grpc_code_name == "INVALID_ARGUMENT" and "max_tokens too large" in str(info.value)
    assert len(openai_server.calls(CHAT)) == 1


def test_slow_server_times_out(openai_server):
    openai_server.script(CHAT, {"delay_s": 5.0})
    client = OpenAIBackend(openai_server.url, "fake-model", timeout_s=0.2, max_retries=0)
    with client, pytest.raises(BackendTimeout) as info:
        client.chat([{"role": "user", "content": "hi"}])
    assert info.value.grpc_code_name == "DEADLINE_EXCEEDED" and "0.2s" in str(info.value)


def test_timeout_then_success_is_retried(openai_server):
    client = OpenAIBackend(openai_server.url, "fake-model", timeout_s=0.2, max_retries=1, backoff_s=0.001)
    openai_server.script(CHAT, {"delay_s": 5.0})
    with client:
        assert client.chat([{"role": "user", "content": "hi"}]).text == "echo: hi"
    assert len(openai_server.calls(CHAT)) == 2


def test_dropped_connection_is_retried(openai_server, backend):
    openai_server.script(CHAT, {"drop": True})
    assert backend.chat([{"role": "user", "content": "hi"}]).text == "echo: hi"
    assert len(openai_server.calls(CHAT)) == 2


def test_unreachable_endpoint_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIBackend(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_s=0.001)
    with client, pytest.raises(BackendUnavailable) as info:
        client.generate(["x"])
    assert info.value.retryable and "2 attempts" in str(info.value)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("this is not json", "not JSON"),
        ({"object": "list"}, "no 'choices'"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_malformed_success_bodies(openai_server, backend, body, reason):
    openai_server.script(CHAT, {"body": body})
    with pytest.raises(MalformedResponse) as info:
        backend.chat([{"role": "user", "content": "hi"}])
    assert reason in str(info.value)
    assert len(openai_server.calls(CHAT)) == 1


def test_chat_without_content_is_malformed(openai_server, backend):
    openai_server.script(CHAT, {"body": {"choices": [{"message": {"role": "assistant", "content": None}}]}})
    with pytest.raises(MalformedResponse, match="no message content"):
        backend.chat([{"role": "user", "content": "hi"}])


def test_score_counts_a_boundary_straddling_token_as_continuation(openai_server, backend):
    logprobs = {
        "tokens": ["a", "bc", "d", "!"],
        "token_logprobs": [None, -1.0, -2.0, -9.0],
        "text_offset": [0, 1, 3, 4],
    }
    openai_server.script(COMPLETIONS, {"body": {"choices": [{"text": "abcd!", "logprobs": logprobs}]}})
    (score,) = backend.score(["ab"], ["cd"])
    assert score.tokens == ["bc", "d"] and score.total == -3.0
