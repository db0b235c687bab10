"""A user's own prompts and reference answers: SDR's quality labels for real remotes.

TrainDecider's generated suite (`checkable`) is a reproduction world; a user routing real traffic
scores the local LM and the remotes on their own prompts instead. A prompt set is a JSONL file on
`prompts.source` (an upload, a router job's artifact, an s3:// object, or a server path under the
data root: `prompts.path` for short; `paperworks.shared.inputs.resolve_input`) or inline
`prompts.rows`; each row is `{"prompt": ..., "reference": ..., "scorer": optional}`. A refusal names
the line and the key (`prompts.source` "line 3: 'reference' is required"; inline rows are checked
by the job's parameters, e.g. `prompts.rows.2.reference`).

Scorers (`SCORERS`), each giving quality 0 or 1 for an answer against the reference:
- `exact`: whitespace-trimmed equality;
- `contains`: the reference occurs in the answer, case-insensitively;
- `numeric`: the answer's last number equals the reference's number (relative tolerance 1e-6;
  commas as thousands separators are dropped).

The rows are one task family ("prompts") split at random by the job's seed into train / validation
/ test (`validation_fraction`, `test_fraction`). Remote answers are scored whole (up to
`max_answer_tokens`), never cut to their first line.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path

from paperworks.services.router.spec import PromptRow, PromptSetParams
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import InputScope, resolve_input
from pydantic import ValidationError

SCORERS = ("exact", "contains", "numeric")
FIELD = "prompts.source"
MAX_FILE_BYTES = 64 * 1024 * 1024
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def last_number(text: str) -> float | None:
    found = _NUMBER.findall(text.replace(",", ""))
    return float(found[-1]) if found else None


def score(scorer: str, answer: str, reference: str) -> bool:
    if scorer == "exact":
        return answer.strip() == reference.strip()
    if scorer == "contains":
        return reference.strip().lower() in answer.lower()
    if scorer == "numeric":
        got, want = last_number(answer), last_number(reference)
        return got is not None and want is not None and math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    raise ValueError(f"unknown scorer {scorer!r}")


@dataclass(frozen=True)
class ScoredTask:
    """A user's prompt: the shared `Task` interface (kind, prompt, answer, text, check)."""

    prompt: str
    answer: str  # the reference
    scorer: str = "exact"
    kind: str = "prompts"

    @property
    def text(self) -> str:
        return self.prompt + self.answer

    def check(self, output: str) -> bool:
        return score(self.scorer, output, self.answer)


def read_rows(file: Path, field: str = FIELD) -> list[PromptRow]:
    """The local JSONL file's rows, each checked; a refusal names the line and the key (and never
    the server's own path of the file)."""
    if not file.is_file():
        raise InvalidArgument(field, "is not a file (a JSONL file, one row a line)")
    if file.stat().st_size > MAX_FILE_BYTES:
        raise InvalidArgument(field, f"is larger than {MAX_FILE_BYTES} bytes")
    rows = []
    with file.open(encoding="utf-8", errors="strict") as lines:
        try:
            numbered = list(enumerate(lines, start=1))
        except UnicodeDecodeError as exc:
            raise InvalidArgument(field, f"is not UTF-8 text ({exc.reason})") from None
    for number, line in numbered:
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            why = f"line {number}: not JSON ({exc.msg} at column {exc.colno})"
            raise InvalidArgument(field, why) from None
        if not isinstance(data, dict):
            raise InvalidArgument(field, f"line {number}: must be a JSON object, got {type(data).__name__}")
        try:
            rows.append(PromptRow.model_validate(data))
        except ValidationError as exc:
            error = exc.errors()[0]
            key = ".".join(str(p) for p in error["loc"]) or "(row)"
            why = "is required" if error["type"] == "missing" else error["msg"]
            if error["type"] == "extra_forbidden":
                why = "is not a known key (prompt, reference, scorer)"
            raise InvalidArgument(field, f"line {number}: {key!r} {why}") from None
    return rows


@dataclass
class PromptSuite:
    """The user's rows as SDR's task source (`sdr.local_lm.TaskSource`): one family, three parts."""

    tasks: list[ScoredTask]
    parts: list[int]  # per task: 0 train, 1 validation, 2 test
    max_answer_tokens: int = 256
    families: tuple[str, ...] = ("prompts",)
    remote_first_line: bool = False  # remote answers are scored whole

    @classmethod
    def from_params(cls, params: PromptSetParams, seed: int, inputs: InputScope | None = None) -> PromptSuite:
        """The suite of the job's prompt set; `inputs` (the job context) resolves an upload, an
        artifact or an s3:// object (a server path needs none)."""
        rows = params.rows
        if params.source is not None:
            rows = read_rows(resolve_input(params.source, inputs, "router", FIELD))
        default = params.scorer or "exact"
        tasks = [ScoredTask(r.prompt, r.reference, r.scorer or default) for r in rows]
        n_val = max(1, round(params.validation_fraction * len(tasks)))
        n_test = max(1, round(params.test_fraction * len(tasks)))
        if len(tasks) - n_val - n_test < 10:
            where = FIELD if params.source else "prompts.rows"
            raise InvalidArgument(
                where, f"{len(tasks)} rows leave {len(tasks) - n_val - n_test} for training; give at least "
                f"{10 + n_val + n_test}"
            )
        order = list(range(len(tasks)))
        random.Random(f"prompt-parts-{seed}").shuffle(order)
        parts = [0] * len(tasks)
        for rank, i in enumerate(order):
            parts[i] = 1 if rank < n_val else 2 if rank < n_val + n_test else 0
        return cls(tasks, parts, params.max_answer_tokens)

    def family_of(self, task) -> int:
        return 0

    def generate(self, n: int, seed: int, *, known_only: bool = False, part: int | None = None) -> list:
        """The rows of one part (all of them; `n` does not apply to a user's set). `known_only` (a
        tiny local LM's training documents) gives the training part only, so validation and test
        references are never trained on."""
        if known_only:
            part = 0
        return [t for t, p in zip(self.tasks, self.parts, strict=True) if part is None or p == part]
