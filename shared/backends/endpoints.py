"""Which model endpoints a tenant's job may call, and with which key.

A model reference in a job comes from a tenant, but the worker that follows it holds the
platform's secrets. So keys travel only to endpoints the operator declared
(`PAPERWORKS_MODEL_ENDPOINTS`: name -> base URL, the environment variable holding its key, the
tenants allowed), which tenants name (`endpoint: "name"`); a raw `url` is accepted as the
operator's `PAPERWORKS_RAW_MODEL_URLS` says: `any` (the default in dev mode, no auth tokens:
one user, their own environment), `public` (the default with auth: public addresses only, never
loopback, link-local or private ranges, and never with a key), or `none`. Every refusal is
INVALID_ARGUMENT and says nothing about the environment: an unknown endpoint and one the tenant
may not use read the same, and no environment variable is looked up for a tenant.
"""
from __future__ import annotations

import ipaddress
import json
import os
import socket
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from paperworks.shared.backends.errors import InvalidModel

# The tenant a job or call runs for, or a function that finds it (a job's tenant is read only if
# an endpoint is named): set by the job runner and the RPC runtime.
TENANT: ContextVar = ContextVar("paperworks_tenant", default=None)
RAW_URL_POLICIES = ("any", "public", "none")


@dataclass(frozen=True)
class Endpoint:
    url: str
    api_key_env: str | None = None
    tenants: frozenset[str] | None = None  # None: every tenant


def declared_endpoints(environ=None) -> dict[str, Endpoint]:
    """PAPERWORKS_MODEL_ENDPOINTS: JSON, or @path to a JSON file (a mounted secret/config map):
    {"name": {"url": "http://vllm:8000/v1", "api_key_env": "VLLM_KEY", "tenants": ["team-a"]}}."""
    raw = (os.environ if environ is None else environ).get("PAPERWORKS_MODEL_ENDPOINTS", "").strip()
    if not raw:
        return {}
    if raw.startswith("@"):
        raw = Path(raw[1:]).read_text()
    out = {}
    for name, entry in json.loads(raw).items():
        tenants = entry.get("tenants")
        out[name] = Endpoint(url=entry["url"], api_key_env=entry.get("api_key_env") or None,
                             tenants=frozenset(tenants) if tenants is not None else None)
    return out


def raw_url_policy(environ=None) -> str:
    env = os.environ if environ is None else environ
    chosen = env.get("PAPERWORKS_RAW_MODEL_URLS", "").strip().lower()
    if chosen:
        if chosen not in RAW_URL_POLICIES:
            raise ValueError(f"PAPERWORKS_RAW_MODEL_URLS must be one of {', '.join(RAW_URL_POLICIES)}")
        return chosen
    return "public" if env.get("PAPERWORKS_AUTH_TOKENS", "").strip() else "any"


def current_tenant() -> str | None:
    value = TENANT.get()
    return value() if callable(value) else value


def endpoint(name: str, tenant: str | None, environ=None) -> Endpoint:
    found = declared_endpoints(environ).get(name)
    if found is None or (found.tenants is not None and tenant not in found.tenants):
        raise InvalidModel("endpoint", f"no model endpoint {name!r} is available to this tenant")
    return found


def check_raw_url(url: str, api_key_env: str, environ=None) -> None:
    """Refuses a tenant's raw URL (and key) the operator's policy does not allow."""
    policy = raw_url_policy(environ)
    if policy == "any":
        return
    if policy == "none":
        raise InvalidModel("url", "raw model URLs are not accepted here: name an operator endpoint "
                           "(endpoint=...)")
    if api_key_env:
        raise InvalidModel("api_key_env", "keys are sent only to operator-declared endpoints: name one "
                           "(endpoint=...) instead of a URL and a key")
    host = urlparse(url).hostname or ""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        raise InvalidModel("url", f"host {host!r} does not resolve") from None
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global or ip.is_multicast:
            raise InvalidModel("url", "must reach a public address: loopback, link-local and private "
                               "ranges are refused (ask the operator to declare the endpoint)")
