"""Router losses as composable terms: DPSL, Switch load balancing, router z-loss, and the
aux-loss-free selection bias.

**DPSL** (Mirvakhabova et al., "Dirichlet-Prior Shaping Loss", ICML 2026, arXiv 2510.01185). The
router's softmax probabilities `P` (N tokens x E experts, before top-k) should look like samples of
a Dirichlet(alpha_1..alpha_E) prior. Its marginal for expert k is

    p_k ~ Beta(alpha_k, alpha_0 - alpha_k),     alpha_0 = sum_j alpha_j,

and DPSL matches, per expert, the *distribution* of the N per-token probabilities to that marginal
with the Cramer-von Mises distance of Batch-Shaping (Bejnordi et al., ICLR 2020):

    p_(1) <= ... <= p_(N)  the sorted column k,   e_i = i / (N + 1),
    L_k = (1/N) sum_i (e_i - F_k(p_(i)))^2,        L_DPSL = (1/E) sum_k L_k,

with `F_k` the Beta CDF (the kernel op `paperworks.kernels.ops.beta_cdf_pdf` on a table built once
per prior; its gradient is the Beta PDF, computed on the device without a host sync). Symmetric priors
(alpha_k = alpha) with alpha < 1 push each token to a few confident experts while every expert keeps
the same marginal (balance); asymmetric, per-modality priors apply the same distance within each
modality's tokens with that modality's alpha (specialisation). Note: a KL between the *mean* routing
and alpha / alpha_0 only constrains the average; that is a load-balancing loss, not DPSL.

Peers: Switch load balancing `E sum_i f_i P_i` (Fedus et al. 2021), router z-loss
`mean(logsumexp(logits)^2)` (ST-MoE, Zoph et al. 2022), and DeepSeek-V3's aux-loss-free bias
(a per-expert bias added to the logits for selection only, moved by `rate * sign(mean load - load)`
after each step; `model.MoEFFN.update_bias`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from paperworks.kernels import ops
from paperworks.kernels.ops import BetaTable

TERMS = ("dpsl", "load_balance", "z_loss", "aux_free_bias")


def cvm_sorted(sorted_p: torch.Tensor, table: BetaTable, counts: torch.Tensor | None = None) -> torch.Tensor:
    """Per-column CvM distance of sorted columns (N, K) to the table's K CDFs -> (K,).

    With `counts` (K,), only the first counts[k] rows of column k are samples (the rest padding):
    the sync-free form used for per-modality subsets."""
    n = sorted_p.shape[0]
    i = torch.arange(1, n + 1, device=sorted_p.device, dtype=sorted_p.dtype)[:, None]
    f = ops.beta_cdf_pdf(sorted_p.clamp(0.0, 1.0), table).cdf
    if counts is None:
        return ((i / (n + 1) - f) ** 2).mean(0)
    counts = counts.to(sorted_p.dtype)
    valid = (i <= counts[None, :]).to(sorted_p.dtype)
    return (valid * (i / (counts[None, :] + 1) - f) ** 2).sum(0) / counts.clamp(min=1.0)


class DPSL:
    """The DPSL term for `experts` experts: one prior (symmetric or asymmetric), or one prior per
    modality (group); `__call__(probs, groups)` -> (loss, per-expert CvM distance)."""

    def __init__(self, alphas: torch.Tensor | list, device="cpu"):
        alphas = torch.as_tensor(alphas, dtype=torch.float64)
        if alphas.ndim == 1:
            alphas = alphas[None]
        if alphas.ndim != 2 or alphas.shape[1] < 2 or not bool((alphas > 0).all()):
            raise ValueError("alphas: one positive concentration per expert (at least 2), per group")
        self.alphas = alphas  # (groups, E)
        a = alphas.reshape(-1)
        b = (alphas.sum(1, keepdim=True) - alphas).reshape(-1)
        self.table = ops.beta_table(a, b, device=device)

    @property
    def groups(self) -> int:
        return self.alphas.shape[0]

    def __call__(self, probs: torch.Tensor, groups: torch.Tensor | None = None):
        n, e = probs.shape
        if e != self.alphas.shape[1]:
            raise ValueError(f"prior has {self.alphas.shape[1]} experts, router {e}")
        p = probs.double()
        if self.groups == 1:
            per_expert = cvm_sorted(p.sort(0).values, self.table)
            return per_expert.mean().to(probs.dtype), per_expert
        if groups is None:
            raise ValueError("a per-modality prior needs the tokens' modality")
        m = torch.arange(self.groups, device=p.device)
        mask = groups[None, :] == m[:, None]  # (G, N)
        padded = torch.where(mask[:, :, None], p[None], torch.full_like(p[None], 2.0))  # pad sorts last
        ordered = padded.sort(1).values.permute(1, 0, 2).reshape(n, self.groups * e)
        counts = mask.sum(1).repeat_interleave(e)
        per = cvm_sorted(ordered, self.table, counts).reshape(self.groups, e)
        present = (mask.sum(1) > 0).to(p.dtype)
        per_expert = (per * present[:, None]).sum(0) / present.sum().clamp(min=1.0)
        return per_expert.mean().to(probs.dtype), per_expert


def switch_load_balance(probs: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """Switch/Megatron load balancing `E * sum_i f_i P_i` with f_i the share of the N*k top-k slots
    expert i receives and P_i its mean probability; 1 at perfect balance."""
    e = probs.shape[1]
    f = torch.zeros(e, device=probs.device, dtype=probs.dtype)
    f = f.scatter_add(0, selected.reshape(-1), torch.ones_like(selected.reshape(-1), dtype=probs.dtype))
    f = f / selected.numel()
    return e * (f * probs.mean(0)).sum()


def z_loss(logits: torch.Tensor) -> torch.Tensor:
    """ST-MoE router z-loss: mean squared log-partition of the router logits."""
    return torch.logsumexp(logits.float(), dim=-1).pow(2).mean()


@dataclass
class RouterTerm:
    """One term of the router-loss mix. `alpha`: per-expert concentrations (one value = symmetric);
    `per_modality`: one alpha list per modality (overrides alpha); `warmup_steps`: apply only in the
    first steps (0 = always); `rate`: the aux-free bias update rate."""

    type: str
    weight: float = 1.0
    alpha: list[float] = field(default_factory=lambda: [1.0])
    per_modality: list[list[float]] | None = None
    warmup_steps: int = 0
    rate: float = 1e-3


class RouterLoss:
    """The weighted sum of the terms over every MoE layer's routing record."""

    def __init__(self, terms: list[RouterTerm], experts: int, device="cpu"):
        unknown = [t.type for t in terms if t.type not in TERMS]
        if unknown:
            raise ValueError(f"unknown router terms {unknown}; known {TERMS}")
        self.terms = terms
        self.dpsl = {}
        for i, t in enumerate(terms):
            if t.type == "dpsl":
                if t.per_modality:
                    alphas = [list(a) for a in t.per_modality]
                else:
                    alphas = [list(t.alpha) * experts] if len(t.alpha) == 1 else [list(t.alpha)]
                if any(len(a) != experts for a in alphas):
                    raise ValueError(f"router term {i}: alpha needs 1 or {experts} values")
                self.dpsl[i] = DPSL(alphas, device)

    @property
    def bias_rate(self) -> float:
        return sum(t.rate for t in self.terms if t.type == "aux_free_bias")

    def __call__(self, records: list[dict], step: int, groups: torch.Tensor | None = None):
        """(total loss, {term name: value}) for one step's routing `records` (one per MoE layer)."""
        total = torch.zeros((), device=records[0]["probs"].device)
        parts = {}
        for i, t in enumerate(self.terms):
            if t.type == "aux_free_bias" or (t.warmup_steps and step >= t.warmup_steps):
                continue
            values = []
            for r in records:
                if t.type == "dpsl":
                    g = None if groups is None else groups.reshape(-1)
                    values.append(self.dpsl[i](r["probs"], g)[0])
                elif t.type == "load_balance":
                    values.append(switch_load_balance(r["probs"], r["selected"]))
                else:
                    values.append(z_loss(r["logits"]))
            value = torch.stack(values).mean().float()
            parts[f"{t.type}_{i}"] = float(value.detach())
            total = total + t.weight * value
        return total, parts
