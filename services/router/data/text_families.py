"""A text-routing analogue of the MILD setting: generated prompt families and simulated experts.

Prompts come from four families written from templates (casual questions, arithmetic, coding
requests, rare hard multiplication that looks like arithmetic). Four agents answer them: a free
base model and three remote experts whose consultation prices spread 10x (0.02, 0.06, 0.20).
Each agent's quality on a prompt is drawn around a family-dependent mean (`QUALITY`), so each
family has one expert that is usually best after prices are paid. Family shares fall
geometrically, so the expert that owns the rarest family (hard multiplication -> the large model)
is the best agent `imbalance` times less often than the base model. Prompts are embedded with
MiniLM by the caller (`embed.py`).
Not from the paper's code: a miniature of its LLM-routing experiments.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
from paperworks.services.router.mild.deferral import DeferralData

AGENTS = ("base", "math-expert", "code-expert", "large-generalist")
PRICES = np.array([0.0, 0.02, 0.06, 0.20])
FAMILIES = ("chat", "arithmetic", "coding", "hard_multiplication")
# Mean quality of each agent (columns, AGENTS order) on each family (rows, FAMILIES order).
QUALITY = np.array(
    [
        [0.90, 0.55, 0.50, 0.95],
        [0.30, 0.95, 0.60, 0.97],
        [0.10, 0.25, 0.92, 0.95],
        [0.05, 0.35, 0.20, 0.92],
    ]
)
# Per-draw quality noise. Kept small (0.02) because metrics group inputs by their best agent: at
# 0.05, 0.6% of chat and 3.6% of coding prompts draw the large model as their (noisy) best agent,
# which at 100:1 is nearly as many inputs as the minority family itself, so "minority recall"
# would half measure noise. At 0.02 no family's best agent flips (measured: < 1e-4).
QUALITY_NOISE = 0.02

_TOPICS = [
    "movies",
    "weekend plans",
    "coffee",
    "rainy days",
    "my cat",
    "music",
    "the beach",
    "cooking pasta",
    "a new phone",
    "hiking",
    "books",
    "the weather",
    "gardening",
    "football",
]
_FEELINGS = ["love", "hate", "enjoy", "am bored of", "am curious about", "miss", "worry about"]
_OPS = [("plus", lambda a, b: a + b), ("minus", lambda a, b: a - b), ("times", lambda a, b: a * b)]
_CODE_TASKS = [
    "reverses a list",
    "checks whether a string is a palindrome",
    "sorts a dictionary by value",
    "parses a CSV line",
    "computes a factorial",
    "merges two sorted lists",
    "counts the words in a file",
    "removes duplicates from a list",
    "flattens a nested list",
    "validates an email address",
    "finds the maximum of an array",
    "converts Celsius to Fahrenheit",
]
_LANGS = ["Python", "JavaScript", "Rust", "Go", "Java", "C"]


def _chat(rng: random.Random) -> str:
    templates = [
        "Hey, what do you think about {t}?",
        "I {f} {t}. Any thoughts?",
        "Can you tell me something nice about {t}?",
        "Tell me a fun fact about {t}.",
        "Honestly, I {f} {t}, is that normal?",
    ]
    return rng.choice(templates).format(t=rng.choice(_TOPICS), f=rng.choice(_FEELINGS))


_ARITHMETIC_TEMPLATES = (
    "What is {a} {w} {b}?",
    "Compute {a} {w} {b}.",
    "Quick: {a} {w} {b} = ?",
    "Calculate {a} {w} {b} please.",
)


def _arithmetic(rng: random.Random) -> str:
    word, _ = rng.choice(_OPS)
    a, b = rng.randint(2, 999), rng.randint(2, 999)
    return rng.choice(_ARITHMETIC_TEMPLATES).format(a=a, b=b, w=word)


def _coding(rng: random.Random) -> str:
    return rng.choice(
        [
            "Write a {l} function that {t}.",
            "How do I write {l} code that {t}?",
            "Implement in {l} a routine that {t}.",
            "Show me {l} code which {t}.",
        ]
    ).format(l=rng.choice(_LANGS), t=rng.choice(_CODE_TASKS))


def _hard_multiplication(rng: random.Random) -> str:
    """Three-digit times three-digit, written with `_arithmetic`'s own templates: the rare, hard
    variant only the large model solves. About a quarter of the arithmetic family (a product of
    two three-digit numbers) reads exactly like it, so the two overlap in any query embedding and
    the rejector must decide who gets the shared region, which is where expert imbalance bites.
    (A minority family that MiniLM separates cleanly, as an earlier chained-operations family
    was, is routed right by CE at every ratio and says nothing about MILD.)"""
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    return rng.choice(_ARITHMETIC_TEMPLATES).format(a=a, b=b, w="times")


GENERATORS = (_chat, _arithmetic, _coding, _hard_multiplication)


@dataclass(frozen=True)
class PromptPool:
    """Unique prompts per family, cut into train / validation / test parts so no prompt text is
    shared between splits; embeddings are computed once for the pool and looked up per draw."""

    texts: list[str]
    families: np.ndarray
    parts: np.ndarray  # 0 train, 1 validation, 2 test
    features: np.ndarray | None = None

    @classmethod
    def generate(cls, per_family: int, seed: int, fractions=(0.5, 0.2, 0.3)) -> PromptPool:
        rng = random.Random(f"prompt-pool-{seed}")
        texts, families, parts = [], [], []
        for f, make in enumerate(GENERATORS):
            seen: set[str] = set()
            for _ in range(50 * per_family):
                if len(seen) == per_family:
                    break
                seen.add(make(rng))
            chosen = sorted(seen)
            rng.shuffle(chosen)
            cuts = np.cumsum([round(x * len(chosen)) for x in fractions[:-1]])
            texts += chosen
            families += [f] * len(chosen)
            parts += np.searchsorted(cuts, np.arange(len(chosen)), side="right").tolist()
        return cls(texts, np.array(families), np.array(parts))

    def with_features(self, features: np.ndarray) -> PromptPool:
        return PromptPool(self.texts, self.families, self.parts, features.astype(np.float32))


@dataclass(frozen=True)
class TextFamilies:
    """Draws logged outcomes from a pool: family shares by `imbalance`, qualities around
    `QUALITY`, prices `PRICES`."""

    pool: PromptPool
    imbalance: float = 100.0
    seed: int = 0

    def proportions(self) -> np.ndarray:
        p = self.imbalance ** (-np.arange(len(FAMILIES)) / (len(FAMILIES) - 1))
        return p / p.sum()

    def sample(self, n: int, part: int) -> DeferralData:
        """`n` draws from the pool's `part` (0 train, 1 validation, 2 test)."""
        if self.pool.features is None:
            raise ValueError("embed the pool first (PromptPool.with_features)")
        rng = np.random.default_rng([self.seed, 2, part])
        groups = rng.choice(len(FAMILIES), size=n, p=self.proportions())
        index = np.empty(n, dtype=np.int64)
        for f in range(len(FAMILIES)):
            members = np.flatnonzero((self.pool.families == f) & (self.pool.parts == part))
            mask = groups == f
            index[mask] = rng.choice(members, size=int(mask.sum()))
        quality = np.clip(QUALITY[groups] + QUALITY_NOISE * rng.normal(size=(n, len(AGENTS))), 0, 1)
        return DeferralData(
            features=self.pool.features[index],
            errors=1.0 - quality,
            alpha=np.ones(len(AGENTS)),
            beta=PRICES.copy(),
            agents=list(AGENTS),
            texts=[self.pool.texts[i] for i in index],
            groups=groups,
        )
