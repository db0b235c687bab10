"""MCQ items (a question, its options, the gold's index) and the NonsenseQA generator.

NonsenseQA (Nowak, Cadet & Chin, "ABCD: All Biases Come Disguised", ICML 2026,
arXiv 2602.17445; project page) asks questions made of random words with random "correct" answers,
placed uniformly over the positions: no model can know the answer, so whatever beats chance is
bias (label, position, or the few-shot demos' answer distribution). Its attack variant puts
every demo's answer at one label, which measures how far a model follows the demos.
(Reading a dataset's JSONL rows into items is input handling: `paperworks.services.bias.data`.)
"""

from __future__ import annotations

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
