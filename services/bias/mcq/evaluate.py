"""Running the standard and M&D protocols over every permutation, and their bias metrics.

ABCD (arXiv 2602.17445; the variance claim as summaries report it): accuracy is measured once per
option permutation; the protocol is robust when that accuracy barely moves (its standard
deviation / variance across permutations), and the headline figure is the variance ratio standard
/ M&D. Selection histograms by label, display position and original option show what a model
leans on, and under the few-shot attack (every demo answered at one label) the share of answers
at the demos' majority label shows how far it follows the demos (chance is 1 / n_options).

The standard protocol reads the model's letter either from the label log-probabilities (one
`score` per label, the usual harness method) or from a generated answer; M&D always generates
and matches the text. Label log-probabilities need a backend that scores the very prompt the
model answers: a local model, or an OpenAI-compatible endpoint spoken to over /v1/completions.
A chat endpoint (`api: chat`, the default) gets the prompt as a user message and returns at
most the logprobs of the tokens it wrote, never a label's, so there the standard protocol falls
back to generating its answer and parsing the letter from the text, and the report says so
(`standard_scoring` is what ran, `standard_scoring_fallback` why); the same happens when a
completions endpoint refuses to echo prompt logprobs (`Unsupported`). Both protocols then reach
the model by the same route, so their comparison stays like for like. Demos are fixed per
question (drawn once by the seed) and not permuted: only the question's own options move
between permutations.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from paperworks.services.bias.embedder import SentenceEmbedder
from paperworks.services.bias.mcq.match import Match, match_text, parse_letter
from paperworks.services.bias.mcq.nonsenseqa import LETTERS, MCQItem
from paperworks.services.bias.mcq.render import DASH, render_prompt
from paperworks.shared.backends import ModelBackend


@dataclass(frozen=True)
class MCQSettings:
    shots: int = 0
    attack_label: int | None = None  # every demo answered at this position
    standard_scoring: str = "logprob"  # or "generate"
    max_new_tokens: int = 48
    seed: int = 0


@dataclass(frozen=True)
class Selection:
    item: MCQItem  # as displayed (permuted)
    order: tuple[int, ...]
    response: str
    match: Match

    @property
    def correct(self) -> bool:
        return self.match.index == self.item.answer

    @property
    def original(self) -> int | None:
        return None if self.match.index is None else self.order[self.match.index]


def label_scoring_unavailable(model: ModelBackend) -> str | None:
    """Why `model` cannot score label log-probabilities for the standard protocol (None: it can)."""
    if not model.supports("score"):
        return f"the {model.kind} backend cannot score continuations"
    if model.kind == "openai" and getattr(model, "api", "chat") == "chat":
        return (
            "the model is reached over /v1/chat/completions (api: chat), which returns no log-probabilities "
            "of the option labels; the letter is parsed from the generated answer"
        )
    return None


def chat_route(model: ModelBackend) -> bool:
    """Whether `generate` sends the prompt as a chat message (a chat model may answer on a new line)."""
    return model.kind == "openai" and getattr(model, "api", "chat") == "chat"


def choose_demos(
    items: Sequence[MCQItem], pool: Sequence[MCQItem], settings: MCQSettings
) -> list[list[MCQItem]]:
    """k demos per question, drawn once from `pool` (never the question itself)."""
    rng = random.Random(settings.seed)
    out = []
    for item in items:
        candidates = [d for d in pool if d.question != item.question]
        demos = rng.sample(candidates, min(settings.shots, len(candidates)))
        if settings.attack_label is not None:
            demos = [
                d.with_answer_at(settings.attack_label)
                for d in demos
                if settings.attack_label < len(d.options)
            ]
        out.append(demos)
    return out


def answer_one(
    model: ModelBackend,
    protocol: str,
    item: MCQItem,
    demos: Sequence[MCQItem],
    settings: MCQSettings,
    embedder: Callable[[], SentenceEmbedder],
) -> tuple[str, Match]:
    prompt = render_prompt(protocol, item, demos)
    if protocol == "standard" and settings.standard_scoring == "logprob":
        labels = [f" {LETTERS[i]}" for i in range(len(item.options))]
        scores = model.score([prompt] * len(labels), labels)
        best = int(np.argmax([s.total for s in scores]))
        return labels[best].strip(), Match(best, "letter")
    text = model.generate(
        [prompt],
        max_new_tokens=settings.max_new_tokens,
        stop=[] if chat_route(model) else ["\n"],
        temperature=0.0,
        seed=settings.seed,
        logprobs=False,
    )[0].text
    if protocol == "standard":
        return text, parse_letter(text, len(item.options))
    return text, match_text(text, item.options, embedder)


def run_permutation(
    model: ModelBackend,
    protocol: str,
    items: Sequence[MCQItem],
    demos: Sequence[Sequence[MCQItem]],
    order: tuple[int, ...],
    settings: MCQSettings,
    embedder: Callable[[], SentenceEmbedder],
) -> list[Selection]:
    selections = []
    for item, item_demos in zip(items, demos, strict=True):
        shown = item.permuted(order)
        response, match = answer_one(model, protocol, shown, item_demos, settings, embedder)
        selections.append(Selection(shown, order, response, match))
    return selections


def protocol_metrics(
    protocol: str, per_permutation: Sequence[Sequence[Selection]], demos: Sequence[Sequence[MCQItem]]
) -> dict:
    accuracies = [float(np.mean([s.correct for s in sels])) if sels else 0.0 for sels in per_permutation]
    flat = [s for sels in per_permutation for s in sels]
    n_options = len(flat[0].item.options) if flat else 0
    positions = Counter(s.match.index for s in flat if s.match.index is not None)
    originals = Counter(s.original for s in flat if s.original is not None)
    labels = LETTERS if protocol == "standard" else [DASH] * n_options
    majority = [_majority(d) for d in demos]
    followed = [
        s.match.index == majority[k]
        for sels in per_permutation
        for k, s in enumerate(sels)
        if majority[k] is not None
    ]
    return {
        "accuracy_per_permutation": accuracies,
        "mean_accuracy": float(np.mean(accuracies)) if accuracies else 0.0,
        "std_accuracy": float(np.std(accuracies)) if accuracies else 0.0,
        "variance": float(np.var(accuracies)) if accuracies else 0.0,
        "selections": len(flat),
        "unmatched": sum(s.match.index is None for s in flat),
        "by_position": [positions.get(i, 0) for i in range(n_options)],
        "by_label": (
            {LETTERS[i]: positions.get(i, 0) for i in range(n_options)}
            if protocol == "standard"
            else {labels[0]: sum(positions.values())}
        ),
        "by_original_option": [originals.get(i, 0) for i in range(n_options)],
        "demo_majority_agreement": float(np.mean(followed)) if followed else None,
        "chance": 1.0 / n_options if n_options else None,
        "match_methods": dict(Counter(s.match.method for s in flat)),
        "mean_match_margin": _mean([s.match.margin for s in flat if s.match.margin is not None]),
    }


def _majority(demos: Sequence[MCQItem]) -> int | None:
    if not demos:
        return None
    counts = Counter(d.answer for d in demos).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def variance_ratio(standard: dict, md: dict) -> float | None:
    """Var_standard / Var_M&D; None when M&D's accuracy did not vary at all."""
    return standard["variance"] / md["variance"] if md["variance"] > 0 else None
