"""Model references, the error hierarchy, result helpers and JSON answer parsing."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from paperworks.shared.backends import (
    BackendError,
    HiddenStates,
    InvalidModel,
    InvalidRequest,
    MalformedOutput,
    ModelRef,
    RemoteError,
    Score,
    Unsupported,
    parse_json_answer,
)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "onnx", "path": "/m"}, "kind"),
        ({"kind": "hf"}, "path"),
        ({"kind": "openai", "url": "localhost:8000", "model": "m"}, "url"),
        ({"kind": "openai", "url": "http://h/v1"}, "model"),
        ({"kind": "tiny", "path": "/m", "timeout_s": 0}, "timeout_s"),
        ({"kind": "tiny", "path": "/m", "max_retries": -1}, "max_retries"),
        ({"kind": "tiny", "path": "/m", "dtype": "int8"}, "dtype"),
        ({"kind": "tiny", "path": "/m", "colour": "red"}, "colour"),
        ({"path": "/m"}, "kind"),
        ({"kind": "tiny", "path": "/m", "timeout_s": "10"}, "timeout_s"),
        ({"kind": "tiny", "path": "/m", "max_retries": 1.5}, "max_retries"),
        ({"kind": "hf", "path": 7}, "path"),
    ],
)
def test_model_ref_errors_name_the_field(fields, field):
    with pytest.raises(InvalidModel) as info:
        ModelRef.from_dict(fields)
    assert info.value.field == field and info.value.grpc_code_name == "INVALID_ARGUMENT"


def test_api_key_comes_from_the_named_env_var(monkeypatch):
    ref = ModelRef(kind="openai", url="https://api.example/v1", model="m", api_key_env="PW_KEY")
    monkeypatch.delenv("PW_KEY", raising=False)
    with pytest.raises(InvalidModel, match="PW_KEY is not set"):
        ref.api_key()
    monkeypatch.setenv("PW_KEY", "secret")
    assert ref.api_key() == "secret" and "secret" not in repr(ref)


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [(400, "INVALID_ARGUMENT", False), (401, "UNAUTHENTICATED", False), (404, "NOT_FOUND", False),
     (429, "RESOURCE_EXHAUSTED", True), (500, "UNAVAILABLE", True), (418, "UNKNOWN", False)],
)  # fmt: skip
def test_remote_error_codes_follow_the_status(status, code, retryable):
    err = RemoteError(status, "{}", "boom")
    assert (err.grpc_code_name, err.retryable) == (code, retryable)
    assert isinstance(err, BackendError)


def test_every_error_carries_a_grpc_code():
    errors = [
        InvalidRequest("prompts", "x"),
        Unsupported("openai", "hidden_states", "x"),
        MalformedOutput("x", "text"),
    ]
    assert [e.grpc_code_name for e in errors] == [
        "INVALID_ARGUMENT",
        "FAILED_PRECONDITION",
        "FAILED_PRECONDITION",
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    st.sampled_from(["", "Sure! ", "```json\n"]),
)
def test_json_answers_are_found_in_chatty_text(value, prefix):
    suffix = "\n```" if prefix.startswith("```") else ""
    assert parse_json_answer(prefix + json.dumps(value) + suffix) == value


def test_non_json_answers_say_why():
    with pytest.raises(MalformedOutput, match="not JSON") as info:
        parse_json_answer("I think {the answer} is yes")
    assert info.value.text == "I think {the answer} is yes"
    with pytest.raises(MalformedOutput, match="empty"):
        parse_json_answer("  ")


def test_result_helpers():
    score = Score(logprobs=[-1.0, -3.0])
    assert (score.total, score.mean_nll) == (-4.0, 2.0)
    states = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3)
    hs = HiddenStates(token_ids=[1, 2, 3, 4, 5], layers=(0, 2), states=states, prefix_len=3)
    torch.testing.assert_close(hs.last("prefix"), states[:, 2])
    torch.testing.assert_close(hs.mean("continuation"), states[:, 3:].mean(1))
    assert hs.span("all").shape == (2, 5, 3)
