"""Remote agents for SDR: simulated experts of known accuracy and price, or real endpoints.

A simulated remote answers a task family correctly with a fixed probability; its outcome on a
trace is drawn from a generator seeded by (trace seed, remote index), so traces are repeatable.
A real remote is any model behind the shared backends (`openai` for OpenAI-compatible servers):
the router sends it the prompt, checks its answer like the local one, and surfaces its failures
as the backend reports them (HTTP status, server message, attempts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from paperworks.shared.backends import ModelBackend, ModelRef, load_backend
from paperworks.shared.backends.tiny_data import Task


@dataclass(frozen=True)
class RemoteAgent:
    name: str
    price: float
    accuracy: tuple[float, ...] | None = None  # per family (suite order): a simulated remote
    model: ModelRef | None = None  # a real one
    max_new_tokens: int = 16

    @property
    def simulated(self) -> bool:
        return self.model is None

    def open(self) -> ModelBackend:
        assert self.model is not None
        return load_backend(self.model)


def simulated_quality(agent: RemoteAgent, families: np.ndarray, seed: int, index: int) -> np.ndarray:
    assert agent.accuracy is not None
    rng = np.random.default_rng([seed, 7, index])
    return (rng.random(len(families)) < np.asarray(agent.accuracy)[families]).astype(np.float64)


def first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


def remote_quality(
    agent: RemoteAgent,
    tasks: Sequence[Task],
    *,
    max_new_tokens: int | None = None,
    first_line_only: bool = True,
) -> np.ndarray:
    """Ask a real remote every task's prompt (greedy; through /chat/completions unless its model
    reference says api=completions) and score each answer with the task's own check. The generated
    suite's answers are one line (`first_line_only`, the agent's `max_new_tokens`); a user's prompt
    set scores whole answers of up to its `max_answer_tokens`."""
    with agent.open() as backend:
        generations = backend.generate(
            [t.prompt for t in tasks],
            max_new_tokens=max_new_tokens or agent.max_new_tokens,
            temperature=0.0,
            stop=["\n"] if first_line_only else [],
            logprobs=False,
        )
    cut = first_line if first_line_only else str.strip
    return np.array([float(t.check(cut(g.text))) for t, g in zip(tasks, generations, strict=True)])
