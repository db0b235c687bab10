"""No request a tenant can make gets a worker to send a secret to a URL of the tenant's choosing.

Keys go only to endpoints the operator declared, to the tenants allowed; with auth on, a raw URL
must reach a public address and never carries a key; refusals say nothing about the environment.
Checked over real HTTP: the local OpenAI-compatible server records each request's headers."""
from __future__ import annotations

import json

import pytest
from paperworks.shared.backends import endpoints, load_backend
from paperworks.shared.backends.spec import ModelSpec
from pydantic import ValidationError

SECRET = "sk-operator-secret"


@pytest.fixture
def operator(monkeypatch, openai_server):
    """Auth on, one declared endpoint (the local server) for team-a, holding the key."""
    monkeypatch.setenv("PAPERWORKS_AUTH_TOKENS", "team-a:ta,team-b:tb")
    monkeypatch.setenv("OPERATOR_KEY", SECRET)
    openai_server.api_key = SECRET
    monkeypatch.setenv("PAPERWORKS_MODEL_ENDPOINTS", json.dumps(
        {"local-vllm": {"url": openai_server.url, "api_key_env": "OPERATOR_KEY", "tenants": ["team-a"]}}))
    monkeypatch.delenv("PAPERWORKS_RAW_MODEL_URLS", raising=False)
    return openai_server


def as_tenant(tenant):
    return endpoints.TENANT.set(tenant)


def refused(spec: dict) -> str:
    with pytest.raises(ValidationError) as exc:
        ModelSpec.model_validate(spec)
    return " | ".join(error["msg"] for error in exc.value.errors())


def test_a_declared_endpoint_brings_its_url_and_key_to_its_tenants_only(operator):
    token = as_tenant("team-a")
    try:
        spec = ModelSpec.model_validate({"kind": "openai", "endpoint": "local-vllm", "model": "fake-model"})
        with load_backend(spec.ref()) as backend:
            assert backend.chat([{"role": "user", "content": "hi"}]).text == "echo: hi"
        assert operator.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    finally:
        endpoints.TENANT.reset(token)
    token = as_tenant("team-b")
    try:
        other = refused({"kind": "openai", "endpoint": "local-vllm", "model": "m"})
        unknown = refused({"kind": "openai", "endpoint": "nope", "model": "m"})
        assert "is available to this tenant" in other and other.replace("local-vllm", "nope") == unknown
    finally:
        endpoints.TENANT.reset(token)


@pytest.mark.parametrize("spec, says", [
    ({"api_key_env": "PAPERWORKS_DATABASE_URL", "url": "http://93.184.216.34/v1"}, "keys are sent only"),
    ({"api_key_env": "NO_SUCH_VARIABLE", "url": "http://93.184.216.34/v1"}, "keys are sent only"),
    ({"url": "http://127.0.0.1:9/v1"}, "public address"),
    ({"url": "http://169.254.169.254/latest/v1"}, "public address"),
    ({"url": "http://10.0.0.7:8000/v1"}, "public address"),
    ({"url": "http://[::1]:8000/v1"}, "public address"),
    ({"url": "http://localhost:8000/v1"}, "public address"),
    ({"endpoint": "local-vllm", "url": "http://93.184.216.34/v1"}, "set one of endpoint and url"),
    ({"endpoint": "local-vllm", "api_key_env": "OPERATOR_KEY"}, "set one of endpoint and url"),
])
def test_tenant_urls_and_keys_the_policy_refuses(operator, spec, says):
    token = as_tenant("team-a")
    try:
        message = refused({"kind": "openai", "model": "m", **spec})
    finally:
        endpoints.TENANT.reset(token)
    assert says in message
    assert "is not set" not in message and SECRET not in message  # nothing about the environment
    assert operator.requests == []  # and nothing was sent anywhere


def test_a_raw_public_url_is_called_without_any_key(operator, monkeypatch):
    monkeypatch.setenv("PAPERWORKS_RAW_MODEL_URLS", "any")  # lets the test reach its loopback server
    monkeypatch.setenv("PAPERWORKS_AUTH_TOKENS", "")
    operator.api_key = None
    spec = ModelSpec.model_validate({"kind": "openai", "url": operator.url, "model": "fake-model"})
    with load_backend(spec.ref()) as backend:
        backend.chat([{"role": "user", "content": "hi"}])
    assert "authorization" not in operator.requests[-1].headers


def test_the_operator_can_refuse_raw_urls_entirely(monkeypatch):
    monkeypatch.setenv("PAPERWORKS_RAW_MODEL_URLS", "none")
    assert "not accepted here" in refused({"kind": "openai", "url": "http://93.184.216.34/v1", "model": "m"})
    monkeypatch.setenv("PAPERWORKS_RAW_MODEL_URLS", "any")
    monkeypatch.setenv("PAPERWORKS_AUTH_TOKENS", "")
    ModelSpec.model_validate({"kind": "openai", "url": "http://127.0.0.1:1/v1", "model": "m"})  # dev mode
