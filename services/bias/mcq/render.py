"""The two MCQ prompt formats and the option permutations they are evaluated over.

ABCD (arXiv 2602.17445, abstract and project page): the standard format labels options A, B, C,
... and answers few-shot demos with a letter, so a model can lean on the label, the position, or
the labels the demos used. Matched-and-Dashed (M&D) labels every option with the same dash and
answers demos with the option's full text; the model is asked to write the text of its choice,
which a sentence-similarity matcher maps back to an option. Both are scored over permutations of
the options: all of them for up to 4 options, else the n rotations plus random ones.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

from paperworks.services.bias.mcq.nonsenseqa import LETTERS, MCQItem

DASH = "-"
HEADERS = {
    "standard": "Answer with the letter of the correct option.",
    "md": "Answer with the full text of the correct option.",
}


def render_block(protocol: str, item: MCQItem, *, answered: bool) -> str:
    labels = LETTERS if protocol == "standard" else [DASH] * len(item.options)
    sep = ". " if protocol == "standard" else " "
    lines = [f"Q: {item.question}"] + [f"{labels[i]}{sep}{o}" for i, o in enumerate(item.options)]
    answer = LETTERS[item.answer] if protocol == "standard" else item.gold
    return "\n".join(lines) + "\nAnswer:" + (f" {answer}\n" if answered else "")


def render_prompt(protocol: str, item: MCQItem, demos: Sequence[MCQItem] = ()) -> str:
    """Header, the answered demos, then the question with 'Answer:' left open."""
    blocks = [render_block(protocol, d, answered=True) for d in demos]
    return HEADERS[protocol] + "\n\n" + "\n".join([*blocks, render_block(protocol, item, answered=False)])


def completion(protocol: str, item: MCQItem) -> str:
    """What a perfect model writes after the prompt (the training target of a tiny model)."""
    return f" {LETTERS[item.answer]}" if protocol == "standard" else f" {item.gold}"


def permutations(n: int, max_count: int, seed: int = 0) -> list[tuple[int, ...]]:
    """Display orders (position j shows original option order[j]), identity first: every
    permutation when n! <= max_count and n <= 4; else the n rotations, then distinct random
    permutations up to max_count."""
    if n <= 4 and math.factorial(n) <= max_count:
        return list(itertools.permutations(range(n)))
    orders = [tuple((i + r) % n for i in range(n)) for r in range(n)][:max_count]
    seen = set(orders)
    rng = random.Random(seed)
    budget = min(max_count, math.factorial(n))
    while len(orders) < budget:
        order = list(range(n))
        rng.shuffle(order)
        if tuple(order) not in seen:
            seen.add(tuple(order))
            orders.append(tuple(order))
    return orders
