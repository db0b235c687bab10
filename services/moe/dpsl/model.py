"""A small pre-norm transformer classifier with dense or mixture-of-experts FFNs, and sparse
upcycling.

Sparse upcycling (Komatsuzaki et al., arXiv 2212.05055): every dense FFN becomes E copies of itself
(the experts) plus a new router `p(x) = softmax(W_r x)`; each token goes to its top-k experts,
weighted by its router probabilities renormalised over the k chosen, so the upcycled model computes
exactly the dense function at initialisation (identical experts). Drop-Upcycling (Nakamura et al.,
arXiv 2502.19261) re-initialises, per expert, a random fraction r of the FFN's intermediate units
(their rows of W_in and columns of W_out) from a normal with the original matrix's mean and standard
deviation, breaking the experts' symmetry. The aux-loss-free bias (DeepSeek-V3) is a buffer added to
the logits for the top-k *selection* only.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class ModelConfig:
    d_in: int = 16
    d_model: int = 32
    heads: int = 4
    d_ff: int = 64
    layers: int = 2
    classes: int = 4
    experts: int = 0  # 0: dense FFNs
    top_k: int = 2

    def as_dict(self) -> dict:
        return asdict(self)


class FFN(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w_in = nn.Linear(d_model, d_ff)
        self.w_out = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w_out(F.gelu(self.w_in(x)))


class MoEFFN(nn.Module):
    """E experts (weights stacked per expert), a linear router, top-k dispatch. `record` holds the
    last forward's routing: logits, probabilities (before top-k) and the selected experts."""

    def __init__(self, d_model: int, d_ff: int, experts: int, top_k: int):
        super().__init__()
        if not 1 <= top_k <= experts:
            raise ValueError(f"top_k must be in 1..{experts}")
        self.top_k = top_k
        self.router = nn.Linear(d_model, experts, bias=False)
        self.w_in = nn.Parameter(torch.empty(experts, d_ff, d_model))
        self.b_in = nn.Parameter(torch.zeros(experts, d_ff))
        self.w_out = nn.Parameter(torch.empty(experts, d_model, d_ff))
        self.b_out = nn.Parameter(torch.zeros(experts, d_model))
        self.register_buffer("bias", torch.zeros(experts))
        nn.init.normal_(self.w_in, std=0.02)
        nn.init.normal_(self.w_out, std=0.02)
        nn.init.normal_(self.router.weight, std=0.02)
        self.record: dict = {}

    @property
    def experts(self) -> int:
        return self.w_in.shape[0]

    def forward(self, x):
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        logits = self.router(tokens).float()
        probs = logits.softmax(-1)
        selected = (logits + self.bias).topk(self.top_k, dim=-1).indices
        gate = probs.gather(1, selected)
        gate = gate / gate.sum(-1, keepdim=True)
        weights = torch.zeros_like(probs).scatter(1, selected, gate)  # (N, E), k nonzero per row
        # every expert on every token, combined by the sparse weights: exact and sync-free; fine at
        # this size (a grouped GEMM would compute only the k chosen)
        h = F.gelu(torch.einsum("nd,efd->nef", tokens, self.w_in) + self.b_in)
        out = torch.einsum("nef,edf->ned", h, self.w_out) + self.b_out
        y = (weights.to(out.dtype)[:, :, None] * out).sum(1)
        self.record = {"logits": logits, "probs": probs, "selected": selected}
        return y.reshape(shape)

    @torch.no_grad()
    def update_bias(self, rate: float) -> None:
        """DeepSeek-V3 aux-loss-free balancing: raise the bias of under-loaded experts, lower the
        over-loaded ones', by `rate` per step."""
        selected = self.record["selected"]
        load = torch.bincount(selected.reshape(-1), minlength=self.experts).float()
        self.bias += rate * torch.sign(load.mean() - load)


class Block(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(c.d_model)
        self.attn = nn.MultiheadAttention(c.d_model, c.heads, batch_first=True)
        self.norm2 = nn.LayerNorm(c.d_model)
        self.ffn = MoEFFN(c.d_model, c.d_ff, c.experts, c.top_k) if c.experts else FFN(c.d_model, c.d_ff)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))


class TokenClassifier(nn.Module):
    """Token features (B, L, d_in) -> class logits (B, classes), mean-pooled over the sequence."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.d_model % config.heads:
            raise ValueError("heads must divide d_model")
        self.config = config
        self.embed = nn.Linear(config.d_in, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.classes)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h).mean(1))

    def moe_layers(self) -> list[MoEFFN]:
        return [b.ffn for b in self.blocks if isinstance(b.ffn, MoEFFN)]

    def routing(self) -> list[dict]:
        return [m.record for m in self.moe_layers()]


@torch.no_grad()
def upcycle(
    dense: TokenClassifier, experts: int, top_k: int, drop_ratio: float = 0.0, seed: int = 0
) -> TokenClassifier:
    """The MoE copy of a dense model: each FFN -> `experts` copies + a new router (std 0.02);
    with `drop_ratio` r > 0, Drop-Upcycling's per-expert re-initialisation of r of the FFN units."""
    if dense.config.experts:
        raise ValueError("the model is already a mixture of experts")
    if not 0.0 <= drop_ratio <= 1.0:
        raise ValueError("drop_ratio must be in [0, 1]")
    config = ModelConfig(**(dense.config.as_dict() | {"experts": experts, "top_k": top_k}))
    gen = torch.Generator().manual_seed(seed)
    moe = TokenClassifier(config)
    state = {k: v for k, v in dense.state_dict().items() if ".ffn." not in k}
    moe.load_state_dict(state, strict=False)
    device = next(dense.parameters()).device
    for block_d, block_m in zip(dense.blocks, moe.blocks, strict=True):
        d, m = block_d.ffn, block_m.ffn
        w_in, b_in = d.w_in.weight.cpu(), d.w_in.bias.cpu()
        w_out, b_out = d.w_out.weight.cpu(), d.w_out.bias.cpu()
        nn.init.normal_(m.router.weight, std=0.02, generator=gen)
        for e in range(experts):
            wi, bi, wo = w_in.clone(), b_in.clone(), w_out.clone()
            if drop_ratio > 0:
                units = torch.randperm(wi.shape[0], generator=gen)[: round(drop_ratio * wi.shape[0])]
                wi[units] = torch.normal(w_in.mean(), w_in.std(), (len(units), wi.shape[1]), generator=gen)
                bi[units] = 0.0
                wo[:, units] = torch.normal(
                    w_out.mean(), w_out.std(), (wo.shape[0], len(units)), generator=gen
                )
            m.w_in[e].copy_(wi)
            m.b_in[e].copy_(bi)
            m.w_out[e].copy_(wo)
            m.b_out[e].copy_(b_out)
    return moe.to(device)


def clone(model: TokenClassifier) -> TokenClassifier:
    return copy.deepcopy(model)
