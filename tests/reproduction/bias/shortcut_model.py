"""A tiny transformer trained in code on MCQs whose lettered form carries a label shortcut.

The miniature of ABCD's setting (arXiv 2602.17445): a model that knows some answers and, where
it does not, leans on an artifact. A question is one word; in a knowable
question that word is one of the options (the gold), in an unknowable one it is none of them and
the gold is arbitrary. The same items are
rendered both ways with the service's own renderers:

- lettered (standard): most golds sit at "A", and the demos of a prompt are all answered at the
  prompt's shortcut label, which the query's gold usually shares, so answering "A" (or the
  demos' label) pays whenever the content does not decide;
- dashed (M&D): golds uniform over positions, demos answered with the full text: no label and
  no position to lean on.

The network is the shared `TinyDecoder`; its tokens are whole words (with their leading space),
newlines and punctuation-bearing words, so that a few hundred training steps on the CPU are
enough. Training is supervised on the answer tokens only.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from paperworks.services.bias.mcq.data import LETTERS, MCQItem, nonsense_word
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


class EchoWorld:
    """Words; a knowable question names one of its options (the gold), an unknowable one names
    a word that is not among the options (its gold is arbitrary)."""

    def __init__(self, seed: int, n_words: int = 64) -> None:
        rng = random.Random(seed)
        words: list[str] = []
        while len(words) < n_words:
            w = nonsense_word(rng, 2)
            if w not in words:
                words.append(w)
        self.words = words

    def item(self, rng: random.Random, knowable: bool, ident: str = "") -> MCQItem:
        picked = rng.sample(self.words, N_OPTIONS + 1)
        options, question = picked[:N_OPTIONS], picked[0] if knowable else picked[-1]
        rng.shuffle(options)
        gold = options.index(question) if knowable else rng.randrange(N_OPTIONS)
        return MCQItem(question, tuple(options), gold, ident)

    def knowable(self, item: MCQItem) -> bool:
        return item.question in item.options

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
    world: EchoWorld, rng: random.Random, knowable_fraction: float, shortcut: float, protocol: str
) -> tuple[str, str]:
    demos = [world.item(rng, True) for _ in range(rng.randint(0, 2))]
    query = world.item(rng, rng.random() < knowable_fraction)
    knowable = world.knowable(query)
    if protocol == "standard":
        label = 0 if rng.random() < shortcut else rng.randrange(N_OPTIONS)
        demos = [d.with_answer_at(label) for d in demos]
        if not knowable or rng.random() < shortcut:
            query = query.with_answer_at(label)
    return render_prompt(protocol, query, demos), completion(protocol, query) + "\n"


def train_shortcut_model(
    world: EchoWorld,
    *,
    steps: int,
    seed: int,
    batch_size: int = 32,
    knowable_fraction: float = 1.0,
    shortcut: float = 0.8,
    dashed_warmup: float = 0.5,
) -> WordTinyLM:
    rng = random.Random(seed)
    tok = world.tokenizer()
    config = TinyConfig(
        dim=64, n_layers=2, n_heads=4, mlp_hidden=176, max_seq_len=128, vocab_size=max(259, len(tok.vocab))
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyDecoder(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    model.train()
    for step in range(steps):
        dashed_only = step < steps * dashed_warmup
        docs = [
            training_example(
                world,
                rng,
                knowable_fraction,
                shortcut,
                "md" if dashed_only else rng.choice(("standard", "md")),
            )
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


def evaluation_set(world: EchoWorld, n: int, seed: int, knowable_fraction: float = 0.5) -> list[MCQItem]:
    """Held-out items stored the way many MCQ files are: the gold listed first."""
    rng = random.Random(seed)
    return [world.item(rng, k < n * knowable_fraction, f"eval-{k}").with_answer_at(0) for k in range(n)]
