"""Generation, scoring and hidden states for any in-process causal LM (the hf and tiny backends).

Both local backends share this one decoding loop instead of transformers' `generate`, so they
agree exactly on semantics: greedy/temperature/top-p sampling from a seeded generator,
logprobs under the untempered distribution, stop strings, and a generation's logprobs equal to
`score_ids` of its tokens. It calls `module` on every step, so a quantizer that swaps its Linear
layers is measured through the very same code path.

Batched forwards pad on the right: in a causal model earlier positions never attend to later
ones, so padding changes nothing and needs no attention mask or position ids.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from paperworks.shared.backends.base import (
    ChatMessage,
    Generation,
    HiddenStates,
    ModelBackend,
    Operation,
    Score,
    check_pairs,
    check_sampling,
    check_texts,
    normalize_messages,
    render_plain_chat,
)
from paperworks.shared.backends.errors import InvalidRequest
from torch import nn


class TorchCausalLM(ModelBackend):
    """Subclasses provide tokenization and one forward; everything else lives here."""

    operations: frozenset[Operation] = frozenset({"generate", "chat", "score", "hidden_states"})
    batch_size = 8

    module: nn.Module
    tokenizer: Any
    device: torch.device
    max_length: int
    eos_ids: frozenset[int]

    @abstractmethod
    def encode(self, text: str, *, add_special: bool = True) -> list[int]:
        """Token ids of `text`; `add_special` adds what the model expects at a sequence start."""

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str: ...

    @abstractmethod
    def _start_ids(self) -> list[int]:
        """What to feed when a prompt encodes to no tokens at all."""

    @abstractmethod
    def _forward(
        self, input_ids: torch.Tensor, *, hidden: bool, cache: Any = None, use_cache: bool = False
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, Any]:
        """(logits [B, T, V], hidden-state stack or None, cache) for `input_ids` [B, T], continuing
        from `cache`. With `use_cache` (a generation step) only the last position's logits are
        needed, so a backend may return just those."""

    def _render_chat(self, messages: list[ChatMessage]) -> tuple[str, bool, tuple[str, ...]]:
        """(prompt text, whether to add special tokens, extra stop strings) for a conversation."""
        return render_plain_chat(messages), True, ("\nuser:", "\nsystem:")

    # ---- raw access for services that work on token batches (the quantizer) ----

    @torch.no_grad()
    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, V] (float32, CPU) of a right-padded id batch [B, T]."""
        logits, _, _ = self._forward(input_ids.to(self.device), hidden=False)
        return logits.float().cpu()

    def token_logprobs(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[B, T-1]: log p(input_ids[:, t+1] | input_ids[:, :t+1]); perplexity is exp(-mean)."""
        logp = self.logits(input_ids).log_softmax(-1)[:, :-1]
        return logp.gather(-1, input_ids[:, 1:].cpu().unsqueeze(-1)).squeeze(-1)

    # ---- ModelBackend ----

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        logprobs: bool = True,
    ) -> list[Generation]:
        stop = check_sampling(max_new_tokens, temperature, top_p, stop)
        rng = _generator(seed)
        return [
            self._generate_ids(self._prompt_ids(p), max_new_tokens, temperature, top_p, rng, stop, logprobs)
            for p in check_texts("prompts", prompts)
        ]

    def chat(
        self,
        messages: Sequence[ChatMessage | Mapping[str, str]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        logprobs: bool = False,
        json_mode: bool = False,
    ) -> Generation:
        stop = check_sampling(max_new_tokens, temperature, top_p, stop)
        text, add_special, extra_stop = self._render_chat(normalize_messages(messages))
        ids = self._prompt_ids(text, add_special=add_special)
        return self._generate_ids(
            ids,
            max_new_tokens,
            temperature,
            top_p,
            _generator(seed),
            (*stop, *extra_stop),
            logprobs,
        )

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[Score]:
        pairs = check_pairs(prompts, continuations)
        return self.score_ids(
            [self._prompt_ids(p) for p, _ in pairs],
            [self.encode(c, add_special=False) for _, c in pairs],
        )

    @torch.no_grad()
    def score_ids(
        self, prompt_ids: Sequence[Sequence[int]], continuation_ids: Sequence[Sequence[int]]
    ) -> list[Score]:
        """`score` on token ids, for callers that must avoid re-tokenizing text."""
        if len(prompt_ids) != len(continuation_ids):
            raise InvalidRequest("continuations", "one continuation per prompt is required")
        if any(len(p) == 0 for p in prompt_ids):
            raise InvalidRequest("prompts", "a prompt needs at least one token to condition on")
        seqs = [list(p) + list(c) for p, c in zip(prompt_ids, continuation_ids, strict=True)]
        scores: list[Score] = []
        for start, logits, _ in self._batched(seqs, "continuations", hidden=False):
            for row, seq in enumerate(seqs[start : start + len(logits)]):
                n_prompt = len(prompt_ids[start + row])
                targets = torch.tensor(seq[n_prompt:], dtype=torch.long)
                logp = logits[row, n_prompt - 1 : len(seq) - 1].float().cpu().log_softmax(-1)
                scores.append(
                    Score(
                        logprobs=logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1).tolist(),
                        token_ids=targets.tolist(),
                        tokens=[self.decode([t]) for t in targets.tolist()],
                        entropies=_entropy(logp).tolist(),
                    )
                )
        return scores

    @torch.no_grad()
    def hidden_states(
        self,
        texts: Sequence[str],
        continuations: Sequence[str] | None = None,
        *,
        layers: Sequence[int] | None = None,
    ) -> list[HiddenStates]:
        if continuations is None:
            prefixes = [self._prompt_ids(t) for t in check_texts("texts", texts)]
            suffixes: list[list[int]] = [[] for _ in prefixes]
        else:
            pairs = check_pairs(texts, continuations)
            prefixes = [self._prompt_ids(t) for t, _ in pairs]
            suffixes = [self.encode(c, add_special=False) for _, c in pairs]
        seqs = [p + s for p, s in zip(prefixes, suffixes, strict=True)]
        out: list[HiddenStates] = []
        for start, _, stack in self._batched(seqs, "texts", hidden=True):
            assert stack is not None
            chosen = _layer_indices(layers, len(stack))
            selected = torch.stack([stack[i] for i in chosen], dim=1).float().cpu()
            for row, seq in enumerate(seqs[start : start + selected.shape[0]]):
                out.append(
                    HiddenStates(
                        token_ids=seq,
                        layers=chosen,
                        states=selected[row, :, : len(seq)].clone(),
                        prefix_len=len(prefixes[start + row]),
                    )
                )
        return out

    # ---- internals ----

    def _prompt_ids(self, text: str, *, add_special: bool = True) -> list[int]:
        return self.encode(text, add_special=add_special) or self._start_ids()

    def _batched(self, seqs: list[list[int]], field: str, *, hidden: bool):
        """Yield (start index, logits, hidden stack) over right-padded batches of `seqs`."""
        for seq in seqs:
            if len(seq) > self.max_length:
                raise InvalidRequest(
                    field, f"{len(seq)} tokens exceed the model's context of {self.max_length}"
                )
        for start in range(0, len(seqs), self.batch_size):
            chunk = seqs[start : start + self.batch_size]
            width = max(len(s) for s in chunk)
            batch = torch.zeros(len(chunk), width, dtype=torch.long)
            for row, seq in enumerate(chunk):
                batch[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            logits, stack, _ = self._forward(batch.to(self.device), hidden=hidden)
            yield start, logits, stack

    @torch.no_grad()
    def _generate_ids(
        self,
        prompt_ids: list[int],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        rng: torch.Generator,
        stop: tuple[str, ...],
        want_logprobs: bool,
    ) -> Generation:
        if len(prompt_ids) >= self.max_length:
            raise InvalidRequest(
                "prompts",
                f"{len(prompt_ids)} prompt tokens leave no room in the context of {self.max_length}",
            )
        budget = min(max_new_tokens, self.max_length - len(prompt_ids))
        out: list[int] = []
        logprobs: list[float] = []
        entropies: list[float] = []
        finish = "length"
        step_input = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        cache = None
        while len(out) < budget:
            logits, _, cache = self._forward(step_input, hidden=False, cache=cache, use_cache=True)
            last = logits[0, -1].float().cpu()
            token = _pick(last, temperature, top_p, rng)
            if token in self.eos_ids:
                finish = "stop"
                break
            logp = last.log_softmax(-1)
            out.append(token)
            logprobs.append(logp[token].item())
            entropies.append(_entropy(logp).item())
            if stop and any(s in self.decode(out) for s in stop):
                finish = "stop"
                break
            step_input = torch.tensor([[token]], dtype=torch.long, device=self.device)
        text = self.decode(out)
        for s in stop:
            text = text.split(s, 1)[0]
        return Generation(
            text=text,
            finish_reason=finish,
            token_ids=out,
            tokens=[self.decode([t]) for t in out],
            logprobs=logprobs if want_logprobs else None,
            entropies=entropies if want_logprobs else None,
        )


def _generator(seed: int | None) -> torch.Generator:
    rng = torch.Generator()
    if seed is None:
        rng.seed()
    else:
        rng.manual_seed(seed)
    return rng


def _pick(logits: torch.Tensor, temperature: float, top_p: float, rng: torch.Generator) -> int:
    if temperature == 0:
        return int(logits.argmax())
    probs = (logits / temperature).softmax(-1)
    if top_p < 1:
        sorted_probs, order = probs.sort(descending=True)
        keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs, 1, generator=rng))


def _layer_indices(layers: Sequence[int] | None, n: int) -> tuple[int, ...]:
    if layers is None:
        return tuple(range(n))
    chosen = []
    for layer in layers:
        if not -n <= layer < n:
            raise InvalidRequest("layers", f"layer {layer} out of range for {n} hidden states")
        chosen.append(layer % n)
    return tuple(chosen)


def _entropy(logp: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of distributions given as log-probabilities over the last dimension."""
    return -(logp.exp() * logp).sum(-1)
