"""The backend over any OpenAI-compatible HTTP endpoint (vLLM, Ollama, TGI, OpenAI itself).

Remote models fail in ways a job must be able to tell apart: overloaded (429, retry later),
broken (5xx), wrong request (4xx, do not retry), too slow, unreachable, or answering garbage.
So every request is retried with exponential backoff and jitter on 408/429/5xx, timeouts and
connection errors, honouring Retry-After; and whatever finally goes wrong is raised as one
precise `BackendError` carrying the HTTP status, the server's own message and the attempt count.

Scoring uses /v1/completions with `echo` and `logprobs`, which vLLM supports and many servers do
not; those answer `Unsupported` rather than a wrong number. Hidden states never cross HTTP.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any, TypeVar

import httpx
from paperworks.shared.backends.base import (
    ChatMessage,
    Generation,
    ModelBackend,
    Score,
    check_pairs,
    check_sampling,
    check_texts,
    normalize_messages,
)
from paperworks.shared.backends.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    MalformedResponse,
    RemoteError,
    Unsupported,
)
from paperworks.shared.backends.ref import ModelRef

_BODY_LIMIT = 2000
T = TypeVar("T")


class OpenAIBackend(ModelBackend):
    """`base_url` includes the API prefix, e.g. http://localhost:8000/v1. `timeout_s` bounds
    connecting and each read; `max_retries` counts retries after the first attempt.

    `api` says which route `generate` speaks: "chat" (default; /chat/completions, each prompt as
    one user message: what hosted chat-only models serve) or "completions" (the legacy
    /completions, raw text continuation). Logprobs are asked for on either route; an endpoint
    that does not return them yields `Generation.logprobs = None`, and callers that need them
    say so. `score` needs the completions route's echoed prompt logprobs."""

    kind = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_retry_after_s: float = 60.0,
        max_concurrency: int = 4,
        api: str = "chat",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api = api
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_retry_after_s = max_retry_after_s
        self.max_concurrency = max_concurrency
        headers = {"User-Agent": "paperworks"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=max_concurrency),
        )
        self._jitter = random.Random()

    @classmethod
    def from_ref(cls, ref: ModelRef) -> OpenAIBackend:
        assert ref.url is not None and ref.model is not None
        return cls(
            ref.url,
            ref.model,
            api_key=ref.api_key(),
            timeout_s=ref.timeout_s,
            max_retries=ref.max_retries,
            max_concurrency=ref.max_concurrency,
            api=ref.api,
        )

    def close(self) -> None:
        self._client.close()

    # ---- ModelBackend ----

    def list_models(self) -> list[str]:
        """Model names the server serves (GET /models)."""
        data = self._request("GET", "/models")
        entries = data.get("data")
        if not isinstance(entries, list) or not all(isinstance(e, dict) and "id" in e for e in entries):
            raise MalformedResponse("GET /models: expected {'data': [{'id': ...}, ...]}", str(data))
        return [str(e["id"]) for e in entries]

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        logprobs: bool = True,
    ) -> list[Generation]:
        stop = check_sampling(max_new_tokens, temperature, top_p, stop)
        prompts = check_texts("prompts", prompts)
        sampling = self._sampling(max_new_tokens, temperature, top_p, seed, stop)

        def one(prompt: str) -> Generation:
            if max_new_tokens == 0:
                return Generation(text="", finish_reason="length", logprobs=[] if logprobs else None)
            if self.api == "chat":
                payload = {"messages": [{"role": "user", "content": prompt}], **sampling,
                           **({"logprobs": True} if logprobs else {})}
                return _chat_generation(self._choice("/chat/completions", payload), logprobs)
            payload = {"prompt": prompt, **sampling, **({"logprobs": 1} if logprobs else {})}
            return _completion_generation(self._choice("/completions", payload), logprobs)

        return self._map(one, prompts)

    def chat(
        self,
        messages: Sequence[ChatMessage | Mapping[str, str]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        logprobs: bool = False,
        json_mode: bool = False,
    ) -> Generation:
        stop = check_sampling(max_new_tokens, temperature, top_p, stop)
        payload: dict[str, Any] = {
            "messages": [asdict(m) for m in normalize_messages(messages)],
            **self._sampling(max_new_tokens, temperature, top_p, seed, stop),
        }
        if logprobs:
            payload["logprobs"] = True
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        return _chat_generation(self._choice("/chat/completions", payload), logprobs)

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[Score]:
        pairs = check_pairs(prompts, continuations)

        def one(pair: tuple[str, str]) -> Score:
            prompt, continuation = pair
            payload = {
                "prompt": prompt + continuation,
                "max_tokens": 1,
                "temperature": 0.0,
                "echo": True,
                "logprobs": 1,
            }
            return _echo_score(self._choice("/completions", payload), len(prompt), len(prompt + continuation))

        return self._map(one, pairs)

    # ---- HTTP ----

    def _sampling(self, max_new_tokens, temperature, top_p, seed, stop) -> dict[str, Any]:
        out: dict[str, Any] = {
            "max_tokens": max_new_tokens,
            "temperature": temperature,
            "top_p": top_p,
        }
        if seed is not None:
            out["seed"] = seed
        if stop:
            out["stop"] = list(stop)
        return out

    def _map(self, fn: Callable[[Any], T], items: list[Any]) -> list[T]:
        if len(items) <= 1 or self.max_concurrency == 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def _choice(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        data = self._request("POST", path, {"model": self.model, **payload})
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise MalformedResponse(f"POST {path}: no 'choices' in the response", str(data)[:_BODY_LIMIT])
        return choices[0]

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        where = f"{method} {self.base_url}{path}"
        attempt = 0
        while True:
            attempt += 1
            retry_after = None
            try:
                response = self._client.request(method, path, json=payload)
            except httpx.TimeoutException as exc:
                failure: BackendError = BackendTimeout(
                    f"{where}: no response within {self.timeout_s}s "
                    f"({type(exc).__name__}) after {_attempts(attempt)}"
                )
            except httpx.TransportError as exc:
                failure = BackendUnavailable(
                    f"{where}: {type(exc).__name__}: {exc or 'connection failed'} after {_attempts(attempt)}"
                )
            else:
                if response.is_success:
                    return _json_body(response, where)
                failure = RemoteError(
                    response.status_code,
                    response.text[:_BODY_LIMIT],
                    f"{where} returned {response.status_code} {response.reason_phrase}: "
                    f"{_server_message(response)} (after {_attempts(attempt)})",
                )
                if not failure.retryable:
                    raise failure
                retry_after = _retry_after(response)
            if attempt > self.max_retries:
                raise failure
            time.sleep(self._delay(attempt, retry_after))

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return ceiling * (0.5 + 0.5 * self._jitter.random())


def _attempts(n: int) -> str:
    return f"{n} attempt{'s' if n > 1 else ''}"


def _json_body(response: httpx.Response, where: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        raise MalformedResponse(f"{where}: body is not JSON ({exc})", response.text[:_BODY_LIMIT]) from exc
    if not isinstance(data, dict):
        raise MalformedResponse(f"{where}: body is not a JSON object", response.text[:_BODY_LIMIT])
    return data


def _server_message(response: httpx.Response) -> str:
    """The error text servers put in their body: OpenAI/vLLM {"error": {"message"}}, TGI
    {"error": "..."}, FastAPI {"detail": ...}; else the raw body."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:500].strip() or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        for key in ("message", "detail"):
            if key in data:
                return str(data[key])
    return response.text[:500]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _finish(choice: dict[str, Any]) -> str:
    return "length" if choice.get("finish_reason") == "length" else "stop"


def _completion_generation(choice: dict[str, Any], want_logprobs: bool) -> Generation:
    text = choice.get("text")
    if not isinstance(text, str):
        raise MalformedResponse("completion choice has no 'text'", str(choice)[:_BODY_LIMIT])
    tokens = logprobs = None
    lp = choice.get("logprobs")
    if want_logprobs and isinstance(lp, dict):
        values, names = lp.get("token_logprobs"), lp.get("tokens")
        if isinstance(values, list) and all(isinstance(v, int | float) for v in values):
            logprobs = [float(v) for v in values]
        if isinstance(names, list):
            tokens = [str(t) for t in names]
    return Generation(text=text, finish_reason=_finish(choice), tokens=tokens, logprobs=logprobs)


def _chat_generation(choice: dict[str, Any], want_logprobs: bool) -> Generation:
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise MalformedResponse("chat choice has no message content", str(choice)[:_BODY_LIMIT])
    tokens = logprobs = None
    lp = choice.get("logprobs")
    entries = lp.get("content") if want_logprobs and isinstance(lp, dict) else None
    if isinstance(entries, list):
        if not all(isinstance(e, dict) and isinstance(e.get("logprob"), int | float) for e in entries):
            raise MalformedResponse("chat logprobs entries need a numeric 'logprob'", str(lp)[:_BODY_LIMIT])
        tokens = [str(e.get("token", "")) for e in entries]
        logprobs = [float(e["logprob"]) for e in entries]
    return Generation(text=content, finish_reason=_finish(choice), tokens=tokens, logprobs=logprobs)


def _echo_score(choice: dict[str, Any], start: int, end: int) -> Score:
    """The continuation's share of an echoed prompt's token logprobs: tokens overlapping
    [start, end) in characters (a token straddling the prompt/continuation boundary counts as
    the continuation's, as the model cannot split it)."""
    lp = choice.get("logprobs")
    if not isinstance(lp, dict) or not lp.get("token_logprobs") or not lp.get("text_offset"):
        raise Unsupported(
            "openai",
            "score",
            "the server returned no prompt token logprobs/offsets for echo=True "
            "(vLLM supports this; Ollama and most hosted APIs do not)",
        )
    tokens, values, offsets = lp.get("tokens") or [], lp["token_logprobs"], lp["text_offset"]
    well_formed = (
        isinstance(values, list)
        and isinstance(offsets, list)
        and isinstance(tokens, list)
        and len(values) == len(offsets)
        and len(tokens) in (0, len(values))
        and all(v is None or isinstance(v, int | float) for v in values)
        and all(isinstance(o, int) for o in offsets)
    )
    if not well_formed:
        raise MalformedResponse(
            "logprobs need equal-length token_logprobs (numbers) and text_offset (ints)",
            str(lp)[:_BODY_LIMIT],
        )
    ends = [*offsets[1:], end]
    picked = [
        i
        for i, (offset, token_end) in enumerate(zip(offsets, ends, strict=True))
        if offset < end and token_end > start and values[i] is not None
    ]
    return Score(
        logprobs=[float(values[i]) for i in picked],
        tokens=[str(tokens[i]) for i in picked] if tokens else None,
    )
