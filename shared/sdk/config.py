"""What a client needs to reach a stack, read from the environment (no server settings).

PAPERWORKS_ENDPOINTS (`service=host:port,...`) and PAPERWORKS_TOKEN name a remote stack; without
them the embedded stack's file (PAPERWORKS_STATE_DIR/stack.json, written by `paperworks up`)
supplies both. PAPERWORKS_TLS_CA_FILE (with optional PAPERWORKS_TLS_CLIENT_CERT_FILE / _KEY_FILE)
switches channels to TLS. The names are the server's settings' names (paperworks.shared.config),
so one environment serves both.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


@dataclass(frozen=True)
class ClientConfig:
    endpoints: str = ""
    token: str = ""
    state_dir: Path = Path.home() / ".paperworks"
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    tls_ca_file: Path | None = None
    tls_client_cert_file: Path | None = None
    tls_client_key_file: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ClientConfig:
        env = os.environ if environ is None else environ
        get = lambda name, default="": env.get(f"PAPERWORKS_{name}", default)  # noqa: E731
        return cls(
            endpoints=get("ENDPOINTS"),
            token=get("TOKEN"),
            state_dir=Path(get("STATE_DIR")) if get("STATE_DIR") else cls.state_dir,
            max_message_bytes=int(get("MAX_MESSAGE_BYTES") or DEFAULT_MAX_MESSAGE_BYTES),
            tls_ca_file=_path(get("TLS_CA_FILE")),
            tls_client_cert_file=_path(get("TLS_CLIENT_CERT_FILE")),
            tls_client_key_file=_path(get("TLS_CLIENT_KEY_FILE")),
        )

    @property
    def stack_file(self) -> Path:
        return self.state_dir / "stack.json"


def resolve_endpoints(config) -> tuple[dict[str, str], str]:
    """(service -> host:port, token) from the environment, else the stack file. `config` is a
    ClientConfig or the server's Settings (same attribute names)."""
    endpoints: dict[str, str] = {}
    token = config.token
    if config.endpoints:
        for entry in config.endpoints.split(","):
            name, _, addr = entry.strip().partition("=")
            endpoints[name] = addr
    elif config.stack_file.exists():
        stack = json.loads(config.stack_file.read_text())
        endpoints = {name: f"{s['host']}:{s['port']}" for name, s in stack["services"].items()}
        token = token or stack.get("token", "")
    return endpoints, token
