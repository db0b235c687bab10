"""The backend over the project's own tiny decoder, trained in-process or loaded from disk.

It is what demos and tests run: the same interface as `hf`, with `.module` and `.tokenizer`
exposed so the quantizer can swap layers and the router can read hidden states.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from paperworks.shared.backends.ref import ModelRef
from paperworks.shared.backends.tiny_model import ByteTokenizer, TinyDecoder, load_tiny
from paperworks.shared.backends.torch_lm import TorchCausalLM


class TinyBackend(TorchCausalLM):
    kind = "tiny"

    def __init__(self, module: TinyDecoder, *, device: str = "cpu") -> None:
        self.device = torch.device(device)
        self.module = module.to(self.device).eval()
        self.tokenizer = ByteTokenizer()
        self.max_length = module.config.max_seq_len
        self.eos_ids = frozenset({self.tokenizer.eos_id})

    @classmethod
    def from_dir(cls, path: str | Path, *, device: str = "cpu") -> TinyBackend:
        return cls(load_tiny(path), device=device)

    @classmethod
    def from_ref(cls, ref: ModelRef) -> TinyBackend:
        assert ref.path is not None
        module = load_tiny(ref.path).to(getattr(torch, ref.dtype))
        return cls(module, device=ref.device)

    def encode(self, text: str, *, add_special: bool = True) -> list[int]:
        return self.tokenizer.encode(text, add_bos=add_special)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def _start_ids(self) -> list[int]:
        return [self.tokenizer.bos_id]

    def _forward(
        self, input_ids: torch.Tensor, *, hidden: bool, cache: Any = None, use_cache: bool = False
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, Any]:
        out = self.module(input_ids, cache, use_cache=use_cache, output_hidden_states=hidden)
        return out.logits, out.hidden_states, out.cache
