"""Fused mixture-of-experts weights as one linear layer per expert, so a method that quantizes
linear layers can quantize experts too. Pure PyTorch.

Transformers 5.x stores a Mixtral / Qwen2-MoE / Qwen3-MoE block's experts as two 3-D parameters
of one module: `gate_up_proj` (E, 2I, H), each expert's gate and up projections stacked, and
`down_proj` (E, H, I). No nn.Linear is left to find, so without this module the experts (most of
an MoE block's weights) would stay float. `unfuse` replaces such a module by `ExpertLinears`: a
(2I, H) and an (H, I) nn.Linear per expert holding exactly that expert's slices, and the same
routed forward pass (the tokens each expert was chosen for, its gate weight, summed). Every
per-expert linear is then an ordinary layer to quantize, pack and store by name
(`<experts>.gate_up.<e>`, `<experts>.down.<e>`). Only the layout of these families is unfused
(gate and up concatenated, not transposed, no bias); another fused layout stays float, and the
accounting (`coverage.py`) says so.
"""

from __future__ import annotations

import torch
from torch import nn


def is_fused(module: nn.Module) -> bool:
    """A transformers fused-experts module of the layout `ExpertLinears` reproduces."""
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    return (isinstance(gate_up, nn.Parameter) and isinstance(down, nn.Parameter)
            and gate_up.dim() == 3 and down.dim() == 3 and hasattr(module, "act_fn")
            and gate_up.shape[0] == down.shape[0] and gate_up.shape[1] == 2 * down.shape[2]
            and gate_up.shape[2] == down.shape[1]
            and not getattr(module, "is_transposed", False) and not getattr(module, "has_bias", False)
            and getattr(module, "is_concatenated", True) and getattr(module, "has_gate", True))


class ExpertLinears(nn.Module):
    """A fused-experts module's function with one (quantizable) linear per expert projection."""

    def __init__(self, gate_up: list[nn.Module], down: list[nn.Module], act_fn: nn.Module):
        super().__init__()
        self.gate_up, self.down, self.act_fn = nn.ModuleList(gate_up), nn.ModuleList(down), act_fn
        self.num_experts = len(gate_up)

    @classmethod
    @torch.no_grad()
    def from_fused(cls, fused: nn.Module) -> ExpertLinears:
        def linear(w: torch.Tensor) -> nn.Linear:
            layer = nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
            layer.weight.copy_(w)
            layer.weight.requires_grad_(fused.gate_up_proj.requires_grad)
            return layer

        return cls([linear(w) for w in fused.gate_up_proj], [linear(w) for w in fused.down_proj],
                   fused.act_fn)

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        """(tokens, H) out: each token's chosen experts' outputs, weighted by its gates (the fused
        module's eager forward)."""
        out = torch.zeros_like(hidden_states)
        for e in top_k_index.unique().tolist():
            if e >= self.num_experts:  # transformers' placeholder index for a dropped slot
                continue
            token, slot = torch.where(top_k_index == e)
            gate, up = self.gate_up[e](hidden_states[token]).chunk(2, dim=-1)
            y = self.down[e](self.act_fn(gate) * up) * top_k_weights[token, slot, None]
            out.index_add_(0, token, y.to(out.dtype))
        return out


def fused_names(model: nn.Module) -> list[str]:
    """Names of the fused-experts modules `unfuse` can replace."""
    return [n for n, m in model.named_modules() if is_fused(m)]


def unfused_names(model: nn.Module) -> list[str]:
    """Names of the modules `unfuse` has replaced (what a checkpoint's manifest records)."""
    return [n for n, m in model.named_modules() if isinstance(m, ExpertLinears)]


def unfuse(model: nn.Module, names: list[str] | None = None) -> list[str]:
    """Replace the named fused-experts modules (default: every one) by `ExpertLinears`, in place,
    same function; returns the names replaced."""
    from .linears import get_module, set_module

    names = fused_names(model) if names is None else list(names)
    for name in names:
        fused = get_module(model, name)
        if not is_fused(fused):
            raise ValueError(f"{name} is not a fused-experts module this quantizer can split")
        set_module(model, name, ExpertLinears.from_fused(fused))
    return names
