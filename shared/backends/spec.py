"""The one job-parameter form of a model reference, shared by every service that names a model.

It mirrors `paperworks.v1.ModelSpec` (common.proto) field for field, validates at submission by
building the backends' `ModelRef` (so a bad reference is INVALID_ARGUMENT naming the field before
any work starts), and is what a job stores. A service that needs narrower kinds or other
defaults subclasses it (the quantizer takes local models only; bias adds models defined in code).
"""
from __future__ import annotations

from typing import Literal
from urllib.parse import urlparse

from paperworks.shared.backends import endpoints
from paperworks.shared.backends.errors import InvalidModel
from paperworks.shared.backends.ref import ModelRef
from paperworks.shared.inputs import InputRefParams, InputScope, path_shorthand, resolve_input
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator


class ModelSpec(BaseModel):
    """A model: an OpenAI-compatible server (`model`, and either `endpoint`, a name the operator
    declared with its URL and key, or a raw `url` with /v1 where the operator allows it; `api`
    chat, the default, or the legacy completions route), or a local `hf` / `tiny` folder: `source`
    (an upload of the folder as an archive, a job's artifact, an s3:// object or a server path) or
    `path`, short for `source.path`. `api_key_env` (dev mode only) names the environment variable
    that holds the key."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["openai", "hf", "tiny"]
    endpoint: str = Field(default="", max_length=128)
    path: str = Field(default="", max_length=4096, validate_default=True)
    url: str = Field(default="", validate_default=True)
    model: str = Field(default="", validate_default=True)
    api_key_env: str = ""
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    max_retries: int = Field(default=3, ge=0, le=10)
    max_concurrency: int = Field(default=4, ge=1, le=64)
    api: Literal["chat", "completions"] = "chat"
    source: InputRefParams | None = Field(default=None, validate_default=True)

    # One check per field, so a refusal names the field (`target.url`, not `target`); the same
    # rules ModelRef enforces, which `_usable` then confirms.
    @model_validator(mode="before")
    @classmethod
    def _path_is_source_path(cls, data):
        return path_shorthand(data)

    @field_validator("source")
    @classmethod
    def _local_source(cls, value: InputRefParams | None, info: ValidationInfo):
        kind = info.data.get("kind")
        if kind in ("hf", "tiny") and value is None:
            raise ValueError(f"a {kind} model needs its folder: source (an upload, an artifact, an "
                             "s3:// object or a server path) or path")
        if value is not None and kind not in ("hf", "tiny"):
            raise ValueError(f"only hf and tiny models are folders, not {kind}")
        return value

    @model_validator(mode="after")
    def _path_mirrors_source(self):
        if self.source is not None and self.source.path and not self.path:
            self.path = self.source.path
        return self

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str, info: ValidationInfo) -> str:
        parsed = urlparse(value)
        web = parsed.scheme in ("http", "https") and parsed.netloc
        if info.data.get("kind") == "openai" and not web and not info.data.get("endpoint"):
            raise ValueError(f"needs an http(s) base URL like http://host:8000/v1, got {value!r}")
        return value

    @field_validator("model")
    @classmethod
    def _served_model(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("kind") == "openai" and not value:
            raise ValueError("an openai endpoint needs the served model name")
        return value

    @model_validator(mode="before")
    @classmethod
    def _endpoint_or_url(cls, data):
        if isinstance(data, dict) and data.get("endpoint"):
            for field in ("url", "api_key_env"):
                if data.get(field):
                    raise ValueError(f"{field}: an operator endpoint brings its own {field}; set one "
                                     "of endpoint and url")
            if data.get("kind", "openai") != "openai":
                raise ValueError("endpoint: only openai models are named by endpoint")
        return data

    @model_validator(mode="after")
    def _usable(self):
        if self.kind == "openai" or self.path:
            try:
                self.ref()
            except InvalidModel as exc:
                raise ValueError(f"{exc.field}: {exc.reason}") from None
        return self

    def ref(self) -> ModelRef:
        """The backends' model reference (raises InvalidModel naming the field), after the
        operator's endpoint policy: a named endpoint brings its URL and key; a raw URL must be
        one the policy allows (`paperworks.shared.backends.endpoints`)."""
        url, key_env = self.url, self.api_key_env
        if self.kind == "openai" and self.endpoint:
            declared = endpoints.endpoint(self.endpoint, endpoints.current_tenant())
            url, key_env = declared.url, declared.api_key_env or ""
        elif self.kind == "openai":
            endpoints.check_raw_url(self.url, self.api_key_env)
        return ModelRef(
            kind=self.kind,
            path=self.path or None,
            url=url or None,
            model=self.model or None,
            api_key_env=key_env or None,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            max_concurrency=self.max_concurrency,
            api=self.api,
        )

    def local_ref(self, scope: InputScope, service: str, field: str) -> ModelRef:
        """The backends' reference with an hf / tiny model's folder made local for this tenant
        (`paperworks.shared.inputs.resolve_input`: server paths under the data root, uploads and
        artifacts unpacked, s3:// objects fetched); refusals name `field`.source."""
        if self.source is None:
            return self.ref()
        folder = resolve_input(self.source, scope, service, f"{field}.source", unpack=True)
        return self.model_copy(update={"path": str(folder)}).ref()

    @property
    def label(self) -> str:
        source = self.source
        where = source and (source.path or source.uri or (source.upload and f"upload:{source.upload[:12]}")
                            or (source.artifact and f"{source.artifact.job_id}/{source.artifact.name}"))
        return f"{self.kind}:{self.model or where}"
