"""Generated checkable tasks for Selective Deferred Routing: arithmetic, string transforms, lookups.

Every task has exactly one right answer, so a local or remote answer is scored without a judge
(quality 1 if it matches, else 0); tasks reuse the shared `Task` type (prompt, answer, exact-match
check). Families: "add" (a+b= with operands below `max_operand`), "upper" (up:abc= -> ABC, a
string transform of 1..`max_len` letters) and "lookup" (get:key= -> value from a fixed table of
random 3-letter keys and values).

The local LM is trained on lookups of only a `known_fraction` of the keys, picked at random by
`table_seed`, while requests ask for any key: whether the local model knows an answer is then a
fact about the model, not about the prompt's surface (random keys look alike to a sentence
encoder). Keys are also cut into router-train / validation / test parts, so the router is scored
on lookups of keys it never saw in its own training traces (novel requests), as a deployed router
would be. That is the regime SDR targets: the local model's own state says more about whether it
is right than the query does.

`key_zipf` > 0 makes knowing graded, as knowledge in real LLMs tracks how often an entity occurs
in pre-training: the local model's training lookups draw the known keys with probability
proportional to 1 / rank**key_zipf (ranks a random order fixed by `table_seed`), so a few keys are
seen hundreds of times (learned), many a handful of times (half-learned or not). Requests (the
router's traces) still ask for the keys of their split uniformly.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from functools import cached_property

from paperworks.services.router.spec import FAMILIES
from paperworks.shared.backends.tiny_data import Task


@dataclass(frozen=True)
class TaskSuite:
    families: tuple[str, ...] = FAMILIES
    max_operand: int = 20
    max_len: int = 4
    lookup_keys: int = 150
    known_fraction: float = 0.6
    table_seed: int = 0
    key_zipf: float = 0.0

    def __post_init__(self) -> None:
        unknown = set(self.families) - set(FAMILIES)
        if unknown or not self.families:
            raise ValueError(f"families must be a non-empty subset of {FAMILIES}, got {self.families}")

    @cached_property
    def table(self) -> dict[str, str]:
        rng = random.Random(f"lookup-table-{self.table_seed}")
        keys: set[str] = set()
        while len(keys) < self.lookup_keys:
            keys.add("".join(rng.choices(string.ascii_lowercase, k=3)))
        return {k: "".join(rng.choices(string.ascii_lowercase, k=3)) for k in sorted(keys)}

    @cached_property
    def key_parts(self) -> dict[str, int]:
        """Each key's part: 0 router-train, 1 validation, 2 test (fractions 0.5 / 0.2 / 0.3)."""
        keys = list(self.table)
        random.Random(f"key-parts-{self.table_seed}").shuffle(keys)
        cuts = (round(0.5 * len(keys)), round(0.7 * len(keys)))
        return {k: 0 if i < cuts[0] else 1 if i < cuts[1] else 2 for i, k in enumerate(keys)}

    @cached_property
    def known_keys(self) -> list[str]:
        """The keys the local model is trained on."""
        keys = list(self.table)
        random.Random(f"known-keys-{self.table_seed}").shuffle(keys)
        return sorted(keys[: round(self.known_fraction * len(keys))])

    @cached_property
    def known_key_weights(self) -> list[float]:
        """Training frequency of each of `known_keys` (uniform when `key_zipf` is 0)."""
        ranks = list(range(len(self.known_keys)))
        random.Random(f"key-rank-{self.table_seed}").shuffle(ranks)
        return [1.0 / (r + 1) ** self.key_zipf for r in ranks]

    def family_of(self, task: Task) -> int:
        return self.families.index(task.kind)

    def generate(self, n: int, seed: int, *, known_only: bool = False, part: int | None = None) -> list[Task]:
        """`n` tasks, families drawn uniformly, deterministic in `seed`. `known_only` restricts
        lookups to the keys the local model may learn (its training documents, drawn with the
        `key_zipf` frequencies); `part` to the keys of one router split."""
        rng = random.Random(f"suite-{seed}")
        keys = self.known_keys if known_only else list(self.table)
        if part is not None:
            keys = [k for k in keys if self.key_parts[k] == part]
        tasks = []
        for _ in range(n):
            kind = rng.choice(self.families)
            if kind == "add":
                a, b = rng.randrange(self.max_operand), rng.randrange(self.max_operand)
                tasks.append(Task(kind, f"{a}+{b}=", str(a + b)))
            elif kind == "upper":
                word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(1, self.max_len)))
                tasks.append(Task(kind, f"up:{word}=", word.upper()))
            else:
                if known_only and self.key_zipf > 0 and part is None:
                    key = rng.choices(self.known_keys, weights=self.known_key_weights)[0]
                else:
                    key = rng.choice(keys)
                tasks.append(Task(kind, f"get:{key}=", self.table[key]))
        return tasks
