"""The one interface the router, bias and quantizer services program against.

Services pick a model per job (a remote endpoint, a local transformers directory, a tiny model the
project trained) and must not care which: every backend returns the same result types and raises
only `errors.BackendError`. Operations a backend cannot do raise `Unsupported`, and `supports`
lets a service reject a job up front instead of failing half-way.

Log-probabilities are always under the model's own distribution (temperature 1), whatever
temperature was used to sample, so that a generation's logprobs agree with `score` of its text.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self

from paperworks.shared.backends.errors import InvalidRequest, MalformedOutput, Unsupported

if TYPE_CHECKING:  # torch stays unimported for workers that only call remote endpoints
    import torch

Operation = Literal["generate", "chat", "score", "hidden_states"]
Part = Literal["prefix", "continuation", "all"]


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Generation:
    """One completion. `token_ids`, `logprobs`, `entropies` are per generated token, or None
    where the backend does not report them (remote servers rarely give ids or entropies)."""

    text: str
    finish_reason: Literal["stop", "length"]
    token_ids: list[int] | None = None
    tokens: list[str] | None = None
    logprobs: list[float] | None = None
    entropies: list[float] | None = None

    @property
    def total_logprob(self) -> float | None:
        return None if self.logprobs is None else float(sum(self.logprobs))


@dataclass(frozen=True)
class Score:
    """Log-probabilities of a continuation's tokens given its prompt."""

    logprobs: list[float]
    token_ids: list[int] | None = None
    tokens: list[str] | None = None
    entropies: list[float] | None = None

    @property
    def total(self) -> float:
        return float(sum(self.logprobs))

    @property
    def mean_nll(self) -> float:
        return -self.total / len(self.logprobs) if self.logprobs else 0.0


@dataclass(frozen=True)
class HiddenStates:
    """Hidden states of one text (a prefix, optionally followed by a continuation).

    `states` is float32 on CPU with shape [len(layers), tokens, hidden]; `layers` are indices into
    the model's hidden-state stack, 0 being the embeddings and the last one the final (normed)
    layer. The first `prefix_len` tokens are the prefix's, the rest the continuation's.
    """

    token_ids: list[int]
    layers: tuple[int, ...]
    states: torch.Tensor
    prefix_len: int

    def span(self, part: Part = "all") -> torch.Tensor:
        if part == "prefix":
            return self.states[:, : self.prefix_len]
        if part == "continuation":
            return self.states[:, self.prefix_len :]
        return self.states

    def last(self, part: Part = "prefix") -> torch.Tensor:
        """[len(layers), hidden] at the last token of `part`."""
        return self._nonempty(part)[:, -1]

    def mean(self, part: Part = "prefix") -> torch.Tensor:
        """[len(layers), hidden] averaged over the tokens of `part`."""
        return self._nonempty(part).mean(dim=1)

    def _nonempty(self, part: Part) -> torch.Tensor:
        states = self.span(part)
        if states.shape[1] == 0:
            raise InvalidRequest(
                "continuations" if part == "continuation" else "texts", f"the {part} has no tokens"
            )
        return states


class ModelBackend(ABC):
    """A causal language model behind one of the three backends."""

    kind: str
    operations: frozenset[Operation] = frozenset({"generate", "chat", "score"})

    def supports(self, operation: Operation) -> bool:
        return operation in self.operations

    @abstractmethod
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
        """Complete each raw prompt. temperature 0 is greedy; `seed` makes sampling repeatable."""

    @abstractmethod
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
        """Answer a conversation. `json_mode` asks servers that support it for a JSON object;
        local models are not constrained, so callers parse with `parse_json_answer` either way."""

    @abstractmethod
    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[Score]:
        """Log-probabilities of each continuation given its prompt."""

    def hidden_states(
        self,
        texts: Sequence[str],
        continuations: Sequence[str] | None = None,
        *,
        layers: Sequence[int] | None = None,
    ) -> list[HiddenStates]:
        """Hidden states of each text (+ its continuation); `layers` selects stack indices
        (negative counts from the end), all layers when None."""
        raise Unsupported(self.kind, "hidden_states", "the backend exposes no hidden states")

    def close(self) -> None:  # noqa: B027 - optional hook; local backends hold nothing to release
        """Release connections; the backend is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_texts(field: str, texts: Sequence[str]) -> list[str]:
    """A list of strings, or a precise error (a bare str would silently iterate characters)."""
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise InvalidRequest(field, "expected a sequence of strings")
    return list(texts)


def check_pairs(prompts: Sequence[str], continuations: Sequence[str]) -> list[tuple[str, str]]:
    prompts, continuations = (
        check_texts("prompts", prompts),
        check_texts("continuations", continuations),
    )
    if len(prompts) != len(continuations):
        raise InvalidRequest(
            "continuations", f"{len(continuations)} continuations for {len(prompts)} prompts"
        )
    return list(zip(prompts, continuations, strict=True))


def check_sampling(
    max_new_tokens: int, temperature: float, top_p: float, stop: Sequence[str]
) -> tuple[str, ...]:
    """Validate sampling arguments; returns the stop strings as a tuple."""
    if max_new_tokens < 0:
        raise InvalidRequest("max_new_tokens", f"must be >= 0, got {max_new_tokens}")
    if temperature < 0:
        raise InvalidRequest("temperature", f"must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise InvalidRequest("top_p", f"must be in (0, 1], got {top_p}")
    if isinstance(stop, str) or not all(isinstance(s, str) and s for s in stop):
        raise InvalidRequest("stop", "expected a sequence of non-empty strings")
    return tuple(stop)


def normalize_messages(messages: Sequence[ChatMessage | Mapping[str, str]]) -> list[ChatMessage]:
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, ChatMessage | Mapping):
            raise InvalidRequest(
                f"messages[{i}]", f"expected a mapping or ChatMessage, got {type(m).__name__}"
            )
        msg = m if isinstance(m, ChatMessage) else ChatMessage(m.get("role", ""), m.get("content", ""))  # type: ignore[arg-type]
        if msg.role not in ("system", "user", "assistant") or not isinstance(msg.content, str):
            raise InvalidRequest(f"messages[{i}]", "needs role system|user|assistant and str content")
        out.append(msg)
    if not out:
        raise InvalidRequest("messages", "at least one message is required")
    return out


def render_plain_chat(messages: Sequence[ChatMessage]) -> str:
    """The prompt format for models without a chat template: 'role: content' lines."""
    return "".join(f"{m.role}: {m.content}\n" for m in messages) + "assistant:"


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_answer(text: str) -> Any:
    """The JSON value in a model answer: the whole text, a ```json fenced block, or the first
    {...} / [...] span. Raises MalformedOutput saying why when there is none."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    for opener, closer in ("{}", "[]"):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    error = "empty answer"
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            if error == "empty answer":
                error = f"not JSON ({exc.msg} at char {exc.pos})"
    raise MalformedOutput(error, text)
