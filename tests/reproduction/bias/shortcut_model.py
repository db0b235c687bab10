"""A tiny transformer trained in code on MCQs whose lettered form carries a label shortcut.

The miniature of ABCD's setting (arXiv 2602.17445): a model that knows some answers
and, where it does not, leans on an artifact of the format. Words are nonsense; a fixed subset
of them are *facts*. A knowable question has exactly one fact among its options, and that fact
is the gold: recognising it is the model's knowledge, and it works under any option order and in
either format. An unknowable question has no fact among its options and an arbitrary gold (a
NonsenseQA question): nothing in the content decides it.

The same generator feeds both formats, rendered with the service's own renderers:

- lettered (standard): knowable golds are uniform over positions (the knowledge must be used),
  but an unknowable question's gold follows two artifacts of the data: when the prompt's demos
  all share one label, it sits at that label (few-shot bias; half the prompts); otherwise the
  demos keep their own labels and it sits at "A" 80% of the time (label bias). So where the model
  does not know, it learns to answer the demos' common label, else "A". (Moving half the
  knowable golds to "A" as well, the issue's "most golds at A" taken literally, left the
  lettered knowledge unreliable in this training budget: 0.71 accuracy on one of two seeds.)
- dashed (M&D): golds uniform over positions, demos answered with their full text: there is no
  label to lean on.

The standard protocol therefore measures knowledge plus a label shortcut that pays only when the
gold happens to be displayed at that label, which is what makes its accuracy move with the
option permutation; M&D measures the knowledge alone.

The network is the shared `TinyDecoder`; its tokens are whole words (with their leading space),
newlines and punctuation-bearing words, so that under a thousand training steps on the CPU are
enough. Training is supervised on the answer tokens only.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from paperworks.services.bias.mcq.nonsenseqa import LETTERS, MCQItem, nonsense_word
from paperworks.services.bias.mcq.render import DASH, HEADERS, completion, render_prompt
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder

N_OPTIONS = 4
_TOKEN = re.compile(r"\n| ?[^\s]+")


class WordTokenizer:
    """Lossless for text made of single-spaced words and newlines; other text maps to UNK."""

    specials = ("<bos>", "<eos>", "<pad>", "<unk>")

    def __init__(self, words: Sequence[str]) -> None:
        self.vocab = list(self.specials) + sorted(set(words) - set(self.specials))
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.bos_id, self.eos_id, self.pad_id, self.unk_id = range(4)

    def encode(self, text: str, *, add_bos: bool = True) -> list[int]:
        ids = [self.index.get(t, self.unk_id) for t in _TOKEN.findall(text)]
        return ([self.bos_id] if add_bos else []) + ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.vocab[i] for i in ids if i >= len(self.specials))


class WordTinyLM(TinyBackend):
    """The shared tiny decoder behind a word tokenizer, as a regular model backend."""

    def __init__(self, module: TinyDecoder, tokenizer: WordTokenizer) -> None:
        super().__init__(module)
        self.tokenizer = tokenizer
        self.eos_ids = frozenset({tokenizer.eos_id})

    def encode(self, text: str, *, add_special: bool = True) -> list[int]:
        return self.tokenizer.encode(text, add_bos=add_special)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def _start_ids(self) -> list[int]:
        return [self.tokenizer.bos_id]


class FactWorld:
    """Nonsense words, `n_facts` of them facts. Questions and the options of unknowable
    questions are drawn from the other words (`fillers`)."""

    def __init__(self, seed: int, n_facts: int = 24, n_fillers: int = 40) -> None:
        rng = random.Random(seed)
        words: list[str] = []
        while len(words) < n_facts + n_fillers:
            w = nonsense_word(rng, 2)
            if w not in words:
                words.append(w)
        self.words = words
        self.facts, self.fillers = words[:n_facts], words[n_facts:]
        self._fact_set = frozenset(self.facts)

    def item(self, rng: random.Random, knowable: bool, ident: str = "") -> MCQItem:
        question = rng.choice(self.fillers)
        others = rng.sample([w for w in self.fillers if w != question], N_OPTIONS - int(knowable))
        options = others + ([rng.choice(self.facts)] if knowable else [])
        rng.shuffle(options)
        gold = (
            next(i for i, o in enumerate(options) if o in self._fact_set)
            if knowable
            else rng.randrange(N_OPTIONS)
        )
        return MCQItem(question, tuple(options), gold, ident)

    def knowable(self, item: MCQItem) -> bool:
        return any(o in self._fact_set for o in item.options)

    def tokenizer(self) -> WordTokenizer:
        words = [t for h in HEADERS.values() for t in _TOKEN.findall(h)]
        words += [
            "\n",
            "Q:",
            "Answer:",
            DASH,
            *[f"{L}." for L in LETTERS[:N_OPTIONS]],
            *[f" {L}" for L in LETTERS[:N_OPTIONS]],
            *[f" {w}" for w in self.words],
        ]
        return WordTokenizer(words)


def training_example(
    world: FactWorld, rng: random.Random, knowable_fraction: float, shortcut: float, protocol: str
) -> tuple[str, str]:
    query = world.item(rng, rng.random() < knowable_fraction)
    demos = [world.item(rng, True) for _ in range(rng.randint(0, 2))]
    if protocol == "standard":
        if rng.random() < 0.5:  # the demos share a label: follow it
            label = rng.randrange(N_OPTIONS)
            demos = [d.with_answer_at(label) for d in demos]
        else:  # demos as they come: the label prior
            label = 0 if rng.random() < shortcut else rng.randrange(N_OPTIONS)
        if not world.knowable(query):
            query = query.with_answer_at(label)
    return render_prompt(protocol, query, demos), completion(protocol, query) + "\n"


def train_shortcut_model(
    world: FactWorld,
    *,
    steps: int,
    seed: int,
    batch_size: int = 32,
    knowable_fraction: float = 0.5,
    shortcut: float = 0.8,
    lr: float = 3e-3,
) -> WordTinyLM:
    rng = random.Random(seed)
    tok = world.tokenizer()
    config = TinyConfig(
        dim=64, n_layers=2, n_heads=4, mlp_hidden=176, max_seq_len=128, vocab_size=max(259, len(tok.vocab))
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyDecoder(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    model.train()
    for _ in range(steps):
        docs = [
            training_example(world, rng, knowable_fraction, shortcut, rng.choice(("standard", "md")))
            for _ in range(batch_size)
        ]
        prompts = [tok.encode(p) for p, _ in docs]
        seqs = [p + tok.encode(c, add_bos=False) for p, (_, c) in zip(prompts, docs, strict=True)]
        width = max(map(len, seqs))
        batch = torch.full((batch_size, width), tok.pad_id, dtype=torch.long)
        targets = torch.full((batch_size, width), -100, dtype=torch.long)
        for row, (seq, prompt) in enumerate(zip(seqs, prompts, strict=True)):
            batch[row, : len(seq)] = torch.tensor(seq)
            targets[row, len(prompt) : len(seq)] = torch.tensor(seq[len(prompt) :])
        logits = model(batch[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return WordTinyLM(model.eval(), tok)


def evaluation_set(world: FactWorld, n: int, seed: int, knowable_fraction: float = 0.5) -> list[MCQItem]:
    """Held-out items (ids eval-k; the first `knowable_fraction` of them knowable), stored the
    way many MCQ files are: the gold listed first. Every permutation moves it anyway."""
    rng = random.Random(seed)
    return [world.item(rng, k < n * knowable_fraction, f"eval-{k}").with_answer_at(0) for k in range(n)]


def accuracy_by_kind(rows: Sequence[dict], world: FactWorld, items: Sequence[MCQItem]) -> dict:
    """Per protocol, accuracy on the knowable and on the unknowable questions (over every
    permutation), from `evaluate_mcq`'s response rows."""
    knowable = {i.id: world.knowable(i) for i in items}
    out: dict[str, dict[str, float]] = {}
    for protocol in sorted({r["protocol"] for r in rows}):
        for kind, flag in (("knowable", True), ("unknowable", False)):
            hits = [r["correct"] for r in rows if r["protocol"] == protocol and knowable[r["id"]] is flag]
            out.setdefault(protocol, {})[kind] = sum(hits) / len(hits) if hits else float("nan")
    return out
