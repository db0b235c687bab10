"""Mapping a model's answer to an option: a letter for the standard format, text for M&D.

ABCD's matcher (arXiv 2602.17445, abstract and project page) embeds the generated answer and
every option with a sentence-similarity model and picks the most similar option; an answer that
equals an option (after normalising case, spacing, a leading dash and trailing punctuation)
short-circuits the embedding; a chat model's answer may span lines ("The correct option is:" then
the option), so a later line that equals an option counts as exact too, and otherwise the first
non-empty line is embedded. The margin between the best and the second-best similarity is
recorded, so an uncertain match can be told from a clear one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from paperworks.services.bias.embedder import SentenceEmbedder
from paperworks.services.bias.mcq.nonsenseqa import LETTERS


@dataclass(frozen=True)
class Match:
    index: int | None
    method: str  # "exact" | "similarity" | "letter" | "none"
    similarity: float | None = None
    margin: float | None = None

    def row(self) -> dict:
        return {
            "index": self.index,
            "method": self.method,
            "similarity": self.similarity,
            "margin": self.margin,
        }


def normalize(text: str) -> str:
    text = text.strip().splitlines()[0] if text.strip() else ""
    text = re.sub(r"^\s*(?:[-*•]|[A-Z][.)])\s+", "", text)
    return re.sub(r"\s+", " ", text).strip().strip(".,;:!?\"'*`").lower()


def match_text(response: str, options: Sequence[str], embedder: Callable[[], SentenceEmbedder]) -> Match:
    """The option `response` names: exact match first, else the MiniLM-nearest option."""
    said = normalize(response)
    if not said:
        return Match(None, "none")
    normalized = [normalize(o) for o in options]
    for line in [said] + [normalize(x) for x in response.strip().splitlines()[1:]]:
        if line and line in normalized:
            return Match(normalized.index(line), "exact", 1.0)
    sims = embedder().similarity([said], list(options))[0]
    order = sims.argsort()[::-1]
    best = int(order[0])
    margin = float(sims[order[0]] - sims[order[1]]) if len(options) > 1 else None
    return Match(best, "similarity", float(sims[best]), margin)


_LETTER = re.compile(r"(?:answer\s*(?:is)?\s*[:\-]?\s*)?\(?\b([A-Z])\b\)?[.):]?", re.IGNORECASE)


def parse_letter(response: str, n_options: int) -> Match:
    """The first standalone option letter in `response` ('B', '(b)', 'Answer: C.')."""
    valid = LETTERS[:n_options]
    for m in _LETTER.finditer(response.strip()):
        letter = m.group(1).upper()
        if letter in valid and (m.group(1).isupper() or len(response.strip()) <= 3):
            return Match(valid.index(letter), "letter")
    return Match(None, "none")
