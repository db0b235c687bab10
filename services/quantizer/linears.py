"""A causal LM's linear layers, as every method sees them: which ones to quantize, their weight
(nn.Linear or a transformers Conv1D), swapping them, their calibration inputs, and one forward
pass for the tiny decoder and transformers models alike. Pure PyTorch.

Which layers: every linear inside the model's list of transformer blocks (the attention and MLP
projections, whatever a family names them: q/k/v/o_proj, query_key_value, dense, fc1/fc2,
c_attn/c_fc, ...); embeddings, the output head and anything outside the blocks (OPT's
project_in/out) stay in full precision, as in both papers. A model without a block list falls
back to every linear whose name is not an embedding or head (`SKIP`).
Devices: batches go to the device of the model they are fed to (`forward`)."""

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


def find_block_list(module: nn.Module) -> tuple[str, nn.ModuleList] | None:
    """(name, list) of the model's transformer blocks: the first ModuleList whose first entry holds
    a linear layer (or an already quantized one), None when there is none."""
    from . import methods  # the quantized layer types (methods imports this module)

    for name, m in module.named_modules():
        if isinstance(m, nn.ModuleList) and len(m) and any(
                is_linear(c) or methods.of_layer(c) is not None or methods.format_of(c) is not None
                for c in m[0].modules()):
            return name, m
    return None


def find_linears(module: nn.Module) -> list[str]:
    """Names of the projections to quantize: every linear inside the transformer blocks
    (embeddings and the output head stay in full precision, as in both papers); an empty one (an
    upcycled Qwen2-MoE's zero-width shared expert) holds nothing to quantize."""
    found = find_block_list(module)
    prefix = "" if found is None else f"{found[0]}."
    return [n for n, m in module.named_modules() if n.startswith(prefix) and is_linear(m)
            and m.weight.numel() and not any(s in n for s in SKIP)]


def device_of(module: nn.Module) -> torch.device:
    """Where a model's tensors live (its first parameter or buffer; cpu for an empty one)."""
    for t in (*module.parameters(), *module.buffers()):
        return t.device
    return torch.device("cpu")


def get_module(root: nn.Module, name: str) -> nn.Module:
    for part in name.split("."):
        root = getattr(root, part)
    return root


def set_module(root: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(get_module(root, parent) if parent else root, leaf, new)


def forward(module: nn.Module, ids: torch.Tensor, hidden: bool = False):
    """(logits, hidden states or None) for the tiny decoder and transformers causal LMs; `ids` go to
    the model's device."""
    ids = ids.to(device_of(module))
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
