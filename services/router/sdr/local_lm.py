"""The local small LM of Selective Deferred Routing: it answers first and yields routing features.

SDR (ICML 2026) runs the local model on every request; its answer is returned when accepted, and
its internals feed the decision module. Per request we extract, from the backend's own API:
- the prompt's hidden state at its last token and averaged over its tokens,
- the answer tokens' hidden states averaged (zeros when the answer is empty),
- the answer's token entropies (mean, max) and negative log-likelihoods (mean, max), and its
  length in tokens.
Hidden states are taken from `layers` of the backend's hidden-state stack (the final, normed
layer by default). The backend's `generate` returns per-token logprobs and entropies but no
hidden states, so the hidden states come from a second, batched forward over prompt + answer
(`hidden_states(prompts, answers)`); that is exact for causal models, costs one extra forward,
and is the one place where a backend change (hidden states from `generate`) would save time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from paperworks.shared.backends.base import ModelBackend
from paperworks.shared.backends.tiny_data import Task
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder
from paperworks.shared.backends.tiny_train import train_tiny_lm

SCALAR_FEATURES = ("entropy_mean", "entropy_max", "nll_mean", "nll_max", "answer_tokens")
DEFAULT_TINY = TinyConfig(dim=64, n_layers=2, n_heads=4, mlp_hidden=176, max_seq_len=48)


class TaskSource(Protocol):
    """What SDR asks of a suite of checkable tasks (the service's `data.TaskSuite`)."""

    families: tuple[str, ...]

    def generate(self, n: int, seed: int, *, known_only: bool = False, part: int | None = None) -> list[Task]:
        ...

    def family_of(self, task: Task) -> int:
        ...


@dataclass(frozen=True)
class FeatureLayout:
    """Where each block sits in a feature vector, so subsets (hidden states only) can be cut."""

    hidden: int
    n_layers: int

    @property
    def dim(self) -> int:
        return 3 * self.hidden * self.n_layers + len(SCALAR_FEATURES)

    def hidden_slice(self) -> slice:
        return slice(0, 3 * self.hidden * self.n_layers)

    def blocks(self) -> list[tuple[int, int]]:
        """Column ranges of each hidden-state block (per layer): what the decider compresses."""
        width = self.hidden
        return [(i * width, (i + 1) * width) for i in range(3 * self.n_layers)]

    def to_dict(self) -> dict:
        blocks = ["prompt_last", "prompt_mean", "answer_mean"]
        return {
            "hidden": self.hidden,
            "layers": self.n_layers,
            "blocks": blocks,
            "scalars": list(SCALAR_FEATURES),
            "dim": self.dim,
        }


@dataclass(frozen=True)
class LocalAnswers:
    texts: list[str]
    features: np.ndarray  # [N, layout.dim] float32
    confidence: np.ndarray  # [N] exp(-mean NLL) of the answer: the cascade's confidence
    layout: FeatureLayout


def answer_and_features(
    backend: ModelBackend,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 8,
    layers: Sequence[int] = (-1,),
) -> LocalAnswers:
    """Greedy local answers and their SDR features (see the module docstring)."""
    prompts = list(prompts)
    generations = backend.generate(prompts, max_new_tokens=max_new_tokens, temperature=0.0)
    answers = [g.text for g in generations]
    states = backend.hidden_states(prompts, answers, layers=list(layers))
    rows, confidence = [], []
    for g, s in zip(generations, states, strict=True):
        prompt_last, prompt_mean = s.last("prefix").flatten(), s.mean("prefix").flatten()
        answer_mean = (
            s.mean("continuation").flatten()
            if s.states.shape[1] > s.prefix_len
            else torch.zeros_like(prompt_last)
        )
        nll = -np.asarray(g.logprobs or [0.0])
        entropy = np.asarray(g.entropies or [0.0])
        scalars = [entropy.mean(), entropy.max(), nll.mean(), nll.max(), float(len(g.logprobs or []))]
        rows.append(np.concatenate([prompt_last.numpy(), prompt_mean.numpy(), answer_mean.numpy(), scalars]))
        confidence.append(float(np.exp(-nll.mean())))
    hidden = states[0].states.shape[-1] if states else 0
    layout = FeatureLayout(hidden=hidden, n_layers=len(layers))
    features = np.stack(rows).astype(np.float32) if rows else np.zeros((0, layout.dim), np.float32)
    return LocalAnswers(answers, features, np.asarray(confidence), layout)


def train_local_tiny(
    suite: TaskSource,
    *,
    steps: int,
    seed: int,
    n_documents: int = 4000,
    config: TinyConfig = DEFAULT_TINY,
    batch_size: int = 32,
    lr: float = 1e-2,
    device: str = "cpu",
) -> TinyDecoder:
    """A tiny decoder trained in-process on the suite's own task distribution (its training
    documents use seeds disjoint from the trace seeds the router uses), on `device`, by the shared
    trainer (`paperworks.shared.backends.tiny_train.train_tiny_lm`)."""
    documents = [t.text for t in suite.generate(n_documents, seed=10_000 + seed, known_only=True)]
    return train_tiny_lm(documents, config, steps=steps, seed=seed, batch_size=batch_size,
                         seq_len=min(32, config.max_seq_len), lr=lr, device=device).module
