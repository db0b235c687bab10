"""A causal LM's linear layers, as every method sees them: which ones to quantize, their weight
(nn.Linear or a transformers Conv1D), swapping them, their calibration inputs, and one forward
pass for the tiny decoder and transformers models alike. Pure PyTorch."""

from __future__ import annotations

import torch
from torch import nn

SKIP = ("lm_head", "embed", "wte", "wpe")


def linear_weight(mod: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(N, M) weight and bias of an nn.Linear or a transformers Conv1D (stored (M, N))."""
    if isinstance(mod, nn.Linear):
        return mod.weight.detach().float(), None if mod.bias is None else mod.bias.detach().float()
    return mod.weight.detach().float().T.contiguous(), None if mod.bias is None else mod.bias.detach().float()


def is_linear(mod: nn.Module) -> bool:
    return isinstance(mod, nn.Linear) or type(mod).__name__ == "Conv1D"


def find_linears(module: nn.Module) -> list[str]:
    """Names of the projections to quantize: every linear inside the blocks (embeddings and the
    output head stay in full precision, as in both papers)."""
    return [n for n, m in module.named_modules() if is_linear(m) and not any(s in n for s in SKIP)]


def get_module(root: nn.Module, name: str) -> nn.Module:
    for part in name.split("."):
        root = getattr(root, part)
    return root


def set_module(root: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(get_module(root, parent) if parent else root, leaf, new)


def forward(module: nn.Module, ids: torch.Tensor, hidden: bool = False):
    """(logits, hidden states or None) for the tiny decoder and transformers causal LMs."""
    if type(module).__name__ == "TinyDecoder":
        out = module(ids, output_hidden_states=hidden)
    else:
        out = module(input_ids=ids, output_hidden_states=hidden, use_cache=False)
    return out.logits.float(), (out.hidden_states if hidden else None)


@torch.no_grad()
def layer_inputs(module: nn.Module, names: list[str], ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Calibration activations: the (tokens, M) input of every named linear."""
    seen: dict[str, torch.Tensor] = {}
    hooks = [get_module(module, n).register_forward_hook(
        lambda m, a, o, n=n: seen.__setitem__(n, a[0].detach().reshape(-1, a[0].shape[-1]).float()))
        for n in names]
    try:
        forward(module, ids)
    finally:
        for h in hooks:
            h.remove()
    return seen
