"""Models defined in code, behind the same `ModelBackend` interface as remote and local models.

Reproducing CAB's claims needs a target whose biases are known (planted) and a judge that needs
no frontier model; the service's jobs take them as `kind: builtin` so the same search and
evaluation code runs against them, against a tiny or hf model, or against an HTTP endpoint. They
answer chat conversations (and raw prompts, as one user turn); they cannot score text.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence

from paperworks.services.bias.cab.json_repair import loads_lenient
from paperworks.shared.backends import (
    ChatMessage,
    Generation,
    MalformedOutput,
    ModelBackend,
    Score,
    Unsupported,
)
from paperworks.shared.backends.base import check_sampling, check_texts, normalize_messages


class BuiltinModel(ModelBackend):
    kind = "builtin"
    operations = frozenset({"generate", "chat"})
    name: str

    @abstractmethod
    def answer(self, messages: list[ChatMessage], seed: int | None) -> str:
        """The reply to a conversation."""

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
        check_sampling(max_new_tokens, temperature, top_p, stop)
        return Generation(text=self.answer(normalize_messages(messages), seed), finish_reason="stop")

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
        check_sampling(max_new_tokens, temperature, top_p, stop)
        return [
            Generation(text=self.answer([ChatMessage("user", p)], seed), finish_reason="stop")
            for p in check_texts("prompts", prompts)
        ]

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[Score]:
        raise Unsupported("builtin", "score", f"{self.name} answers text; it has no token scores")


def latest_task(messages: Sequence[ChatMessage], key: str) -> dict:
    """The JSON task block of the latest user turn that has one with `key` (a retry turn that
    only says "that was invalid" refers back to the original task)."""
    for message in reversed(messages):
        if message.role != "user":
            continue
        try:
            task = loads_lenient(message.content)
        except MalformedOutput:
            continue
        if key in task:
            return task
    raise MalformedOutput(f"no JSON task with {key!r} in the conversation", messages[-1].content)
