"""The generator and the norm constraint of GaRA (§4.2-4.3).

G_f = g(h; Θ): a shared MLP trunk on the pooled graph representation h, then one linear head per
adapted projection m producing its left factor G_f^m ∈ R^{d_out × r} (the graph changes only the
left factor; the right factor R is shared and static).

Norm constraint (§4.3, motivated by Thm 4.1 / Cor 4.2: without it, optimisation drives the norm of
the generated update away from the static one, so it either dominates or is ignored):
    Ĝ = G_f · (mean_j ‖L_{:,j}‖₁) / (mean_j ‖G_f{:,j}‖₁ + ε)
i.e. the generated factor is rescaled to the average column L1 norm of the static left factor L.
ε guards graphs whose generated factor is (near) zero.
"""

from __future__ import annotations

import torch
from torch import nn

EPS = 1e-6


def column_l1(factor: torch.Tensor) -> torch.Tensor:
    """Average column L1 norm: (..., d, r) -> (...) = mean_j ‖F_{:,j}‖₁."""
    return factor.abs().sum(dim=-2).mean(dim=-1)


def norm_constrain(generated: torch.Tensor, static_left: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Ĝ = G_f · column_l1(L) / (column_l1(G_f) + ε) per graph; generated (G, d, r), L (d, r)."""
    scale = column_l1(static_left) / (column_l1(generated) + eps)
    return generated * scale[:, None, None]


class FactorGenerator(nn.Module):
    """h (G, hidden) -> {module name: G_f (G, d_out, r)}."""

    def __init__(self, hidden: int, shapes: dict[str, int], rank: int, init_std: float = 0.01):
        super().__init__()
        self.rank = rank
        self.names = list(shapes)
        self.trunk = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.heads = nn.ModuleList(nn.Linear(hidden, shapes[n] * rank) for n in self.names)
        self.out_dims = [shapes[n] for n in self.names]
        for head in self.heads:
            nn.init.normal_(head.weight, std=init_std)
            nn.init.zeros_(head.bias)

    def forward(self, h: torch.Tensor) -> dict[str, torch.Tensor]:
        z = self.trunk(h)
        return {
            name: head(z).view(h.shape[0], d, self.rank)
            for name, head, d in zip(self.names, self.heads, self.out_dims, strict=True)
        }
