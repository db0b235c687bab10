"""Naming a model in a job spec, and turning that name into a backend.

A job carries a `ModelRef`, not a backend, so it can be stored, validated at submission time and
loaded by whichever worker runs it. Validation raises `InvalidModel` naming the offending field, so
a bad reference is rejected as INVALID_ARGUMENT before any work starts. Backends are imported
lazily: a worker that only calls remote endpoints never imports torch or transformers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal
from urllib.parse import urlparse

from paperworks.shared.backends.base import ModelBackend
from paperworks.shared.backends.errors import InvalidModel

Kind = Literal["openai", "hf", "tiny"]
DTYPES = ("float32", "bfloat16", "float16")
APIS = ("chat", "completions")


@dataclass(frozen=True)
class ModelRef:
    """Where a model lives. `openai` needs `url` (the base URL, with /v1) and `model`; `hf` and
    `tiny` need `path`, a local directory. `api_key_env` names the environment variable holding
    the key, so keys never sit in job specs or logs."""

    kind: Kind
    path: str | None = None
    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    max_concurrency: int = 4
    device: str = "cpu"
    dtype: str = "float32"
    api: str = "chat"

    def __post_init__(self) -> None:
        self._check_types()
        if self.kind not in ("openai", "hf", "tiny"):
            raise InvalidModel("kind", f"must be openai, hf or tiny, got {self.kind!r}")
        if self.kind == "openai":
            self._check_openai()
        elif not self.path:
            raise InvalidModel("path", f"a {self.kind} model needs a local directory path")
        if self.timeout_s <= 0:
            raise InvalidModel("timeout_s", f"must be > 0, got {self.timeout_s}")
        if self.max_retries < 0:
            raise InvalidModel("max_retries", f"must be >= 0, got {self.max_retries}")
        if self.max_concurrency < 1:
            raise InvalidModel("max_concurrency", f"must be >= 1, got {self.max_concurrency}")
        if self.api not in APIS:
            raise InvalidModel("api", f"must be chat or completions, got {self.api!r}")
        if self.dtype not in DTYPES:
            raise InvalidModel("dtype", f"must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    def _check_types(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("timeout_s", "max_retries", "max_concurrency"):
                wanted, noun = ((int, float), "a number") if f.name == "timeout_s" else (int, "an integer")
                if isinstance(value, bool) or not isinstance(value, wanted):
                    raise InvalidModel(f.name, f"must be {noun}, got {value!r}")
            elif value is not None and not isinstance(value, str):
                raise InvalidModel(f.name, f"must be a string, got {value!r}")

    def _check_openai(self) -> None:
        parsed = urlparse(self.url or "")
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidModel("url", f"needs an http(s) base URL like http://host:8000/v1, got {self.url!r}")
        if not self.model:
            raise InvalidModel("model", "an openai endpoint needs the served model name")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelRef:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidModel(unknown[0], f"unknown field; known fields: {', '.join(sorted(known))}")
        if "kind" not in data:
            raise InvalidModel("kind", "is required")
        return cls(**data)

    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise InvalidModel("api_key_env", f"environment variable {self.api_key_env} is not set")
        return key


def load_backend(ref: ModelRef) -> ModelBackend:
    """Open the backend `ref` names; raises InvalidModel when the model cannot be used."""
    if ref.kind == "openai":
        from paperworks.shared.backends.openai import OpenAIBackend

        return OpenAIBackend.from_ref(ref)
    if ref.kind == "hf":
        from paperworks.shared.backends.hf import HFBackend

        return HFBackend.from_ref(ref)
    from paperworks.shared.backends.tiny import TinyBackend

    return TinyBackend.from_ref(ref)
