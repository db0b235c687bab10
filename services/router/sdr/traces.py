"""SDR's training data: traces of the local LM and the remotes on generated checkable tasks.

For each task the local LM answers (greedy) and yields its features (`local_lm`); every remote's
quality on the task is observed (simulated from known accuracy, or a real remote's answer
checked). Options are 0 = accept the local answer (cost 0) and 1..m = the remotes (their prices).
Each split draws its own lookup keys (`part`), so the router is tested on keys it never saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from paperworks.services.router.sdr.local_lm import LocalAnswers, TaskSource, answer_and_features
from paperworks.services.router.sdr.remotes import RemoteAgent, remote_quality, simulated_quality
from paperworks.shared.backends.base import ModelBackend

SPLITS = ("train", "validation", "test")
# Which entries of the local model's hidden-state stack feed the decider (negative: from the end;
# -1 is the final, normed layer). Recorded in the policy so Route reads the same ones.
HIDDEN_LAYERS: tuple[int, ...] = (-1,)


@dataclass
class Traces:
    prompts: list[str]
    families: np.ndarray
    local: LocalAnswers
    qualities: np.ndarray  # [N, 1 + m]: local, then each remote

    def __len__(self) -> int:
        return len(self.prompts)


def collect_traces(
    backend: ModelBackend,
    suite: TaskSource,
    remotes: list[RemoteAgent],
    n: int,
    *,
    seed: int,
    part: int,
    max_new_tokens: int = 8,
    layers: Sequence[int] = HIDDEN_LAYERS,
) -> Traces:
    """Traces for one split (`part` 0/1/2 also selects that split's lookup keys)."""
    tasks = suite.generate(n, seed=1000 * seed + part, part=part)
    local = answer_and_features(
        backend, [t.prompt for t in tasks], max_new_tokens=max_new_tokens, layers=layers
    )
    families = np.array([suite.family_of(t) for t in tasks])
    columns = [np.array([float(t.check(a)) for t, a in zip(tasks, local.texts, strict=True)])]
    for i, remote in enumerate(remotes):
        if remote.simulated:
            columns.append(simulated_quality(remote, families, 1000 * seed + part, i))
        else:
            columns.append(
                remote_quality(
                    remote,
                    tasks,
                    max_new_tokens=getattr(suite, "max_answer_tokens", None),
                    first_line_only=getattr(suite, "remote_first_line", True),
                )
            )
    return Traces([t.prompt for t in tasks], families, local, np.stack(columns, axis=1))


def option_costs(remotes: list[RemoteAgent]) -> np.ndarray:
    return np.array([0.0] + [r.price for r in remotes])
