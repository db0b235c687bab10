"""MCQ datasets: reading JSONL rows with line-numbered errors, and the NonsenseQA generator.

NonsenseQA (Nowak, Cadet & Chin, "ABCD: All Biases Come Disguised", ICML 2026,
arXiv 2602.17445, Sec. 3) asks questions made of random words with random "correct" answers,
placed uniformly over the positions: no model can know the answer, so whatever beats chance is
bias (label, position, or the few-shot demos' answer distribution). Its attack variant puts
every demo's answer at one label, which measures how far a model follows the demos.

Rows are {"question": str, "options": [str, ...], "answer": index | letter | option text}; a
malformed row is reported with its line number and field and the rest still run.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, replace

LETTERS = string.ascii_uppercase
_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"


@dataclass(frozen=True)
class MCQItem:
    question: str
    options: tuple[str, ...]
    answer: int
    id: str = ""

    @property
    def gold(self) -> str:
        return self.options[self.answer]

    def permuted(self, order: tuple[int, ...]) -> MCQItem:
        """Display position j shows original option order[j]."""
        return replace(self, options=tuple(self.options[i] for i in order), answer=order.index(self.answer))

    def with_answer_at(self, position: int) -> MCQItem:
        """The same question with its gold swapped into `position` (the attack's demos)."""
        order = list(range(len(self.options)))
        order[self.answer], order[position] = order[position], order[self.answer]
        return self.permuted(tuple(order))


class RowError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message


def item_from_row(row: object, index: int) -> MCQItem:
    if not isinstance(row, dict):
        raise RowError("row", f"expected a JSON object, got {type(row).__name__}")
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RowError("question", "a non-empty string is required")
    options = row.get("options")
    if not isinstance(options, list) or len(options) < 2 or len(options) > len(LETTERS):
        raise RowError("options", f"a list of 2..{len(LETTERS)} strings is required")
    if not all(isinstance(o, str) and o.strip() for o in options):
        raise RowError("options", "every option must be a non-empty string")
    if len({o.strip().lower() for o in options}) != len(options):
        raise RowError("options", "options must be distinct")
    return MCQItem(
        question.strip(),
        tuple(o.strip() for o in options),
        _answer_index(row.get("answer"), options),
        str(row.get("id") or f"row-{index}"),
    )


def _answer_index(answer: object, options: list[str]) -> int:
    n = len(options)
    if isinstance(answer, bool):
        raise RowError("answer", "must be an index, a letter or an option's text")
    if isinstance(answer, int):
        if not 0 <= answer < n:
            raise RowError("answer", f"index {answer} is out of range for {n} options")
        return answer
    if isinstance(answer, str):
        if len(answer) == 1 and answer.upper() in LETTERS[:n]:
            return LETTERS.index(answer.upper())
        for i, option in enumerate(options):
            if option.strip() == answer.strip():
                return i
        raise RowError("answer", f"{answer!r} is neither a letter A..{LETTERS[n - 1]} nor an option")
    raise RowError("answer", "must be an index, a letter or an option's text")


def read_mcq_jsonl(text: str) -> tuple[list[MCQItem], list[dict]]:
    """(items, errors): every valid row, and {line, field, error} for each malformed one."""
    items, errors = [], []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items.append(item_from_row(row, line_no))
        except json.JSONDecodeError as exc:
            errors.append(
                {"line": line_no, "field": "row", "error": f"not JSON: {exc.msg} at char {exc.pos}"}
            )
        except RowError as exc:
            errors.append({"line": line_no, "field": exc.field, "error": exc.message})
    return items, errors


def nonsense_word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))


def nonsense_qa(
    n: int,
    *,
    n_options: int = 4,
    seed: int = 0,
    question_words: int = 4,
    option_words: int = 1,
    vocabulary: list[str] | None = None,
) -> list[MCQItem]:
    """`n` questions of random words with random gold answers, the golds spread evenly over
    the positions (each position gets n / n_options of them, the remainder at random). Words are
    fresh nonsense, or drawn from `vocabulary` (e.g. the words a small model knows)."""
    rng = random.Random(seed)

    def word() -> str:
        return rng.choice(vocabulary) if vocabulary else nonsense_word(rng, rng.randint(1, 3))

    golds = [i % n_options for i in range(n)]
    rng.shuffle(golds)
    items = []
    for k, gold in enumerate(golds):
        question = " ".join(word() for _ in range(question_words)) + "?"
        options: list[str] = []
        while len(options) < n_options:
            option = " ".join(word() for _ in range(option_words))
            if option not in options:
                options.append(option)
        items.append(MCQItem(question, tuple(options), gold, f"nonsense-{k}"))
    return items
