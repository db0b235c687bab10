"""Training text that needs no download: this machine's CPython sources and generated tasks.

The stdlib gives a tiny model real, varied text for free. The generated tasks are checkable:
each has one right answer, so services (the router's deferral, bias probes) can label a tiny
model's outputs right or wrong without a judge. Both are deterministic given a seed.
"""

from __future__ import annotations

import os
import random
import string
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TASK_KINDS = ("add", "reverse", "sort")
_SKIPPED_DIRS = {"site-packages", "test", "tests", "__pycache__"}


@dataclass(frozen=True)
class Task:
    kind: str
    prompt: str
    answer: str

    @property
    def text(self) -> str:
        """The training document: prompt immediately followed by the answer."""
        return self.prompt + self.answer

    def check(self, output: str) -> bool:
        return output.strip() == self.answer


def generate_tasks(
    n: int,
    *,
    seed: int,
    kinds: Sequence[str] = TASK_KINDS,
    max_digits: int = 2,
    max_len: int = 5,
) -> list[Task]:
    """`n` tasks drawn uniformly from `kinds`: "add" (a+b=), "reverse" (rev:abc=), "sort"
    (sort:3142=); `max_digits` and `max_len` set the difficulty."""
    unknown = set(kinds) - set(TASK_KINDS)
    if unknown or not kinds:
        raise ValueError(f"task kinds must be a non-empty subset of {TASK_KINDS}, got {kinds}")
    rng = random.Random(seed)
    tasks = []
    for _ in range(n):
        kind = rng.choice(list(kinds))
        if kind == "add":
            a, b = (rng.randrange(10 ** rng.randint(1, max_digits)) for _ in range(2))
            tasks.append(Task(kind, f"{a}+{b}=", str(a + b)))
        elif kind == "reverse":
            word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, max_len)))
            tasks.append(Task(kind, f"rev:{word}=", word[::-1]))
        else:
            digits = "".join(rng.choices(string.digits, k=rng.randint(2, max_len)))
            tasks.append(Task(kind, f"sort:{digits}=", "".join(sorted(digits))))
    return tasks


def stdlib_texts(*, max_files: int = 200, max_chars: int = 20_000, seed: int = 0) -> list[str]:
    """Up to `max_files` Python sources of the running interpreter's stdlib (tests excluded),
    each cut to `max_chars`, sampled deterministically by `seed`."""
    files = []
    for folder, subdirs, names in os.walk(sysconfig.get_paths()["stdlib"]):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS)
        files += [Path(folder, n) for n in sorted(names) if n.endswith(".py")]
    chosen = random.Random(seed).sample(files, min(max_files, len(files)))
    texts = []
    for path in chosen:
        try:
            texts.append(path.read_text(encoding="utf-8")[:max_chars])
        except (OSError, UnicodeDecodeError):
            continue
    return texts
