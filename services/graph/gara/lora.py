"""GaRA's weight-level injection (§4.2) and the arms it is compared with.

Every adapted projection (`targets`, e.g. q_proj / v_proj of each layer) of the frozen causal LM
becomes a `LowRankLinear`: y = Ŵx + (L + G) Rᵀ x with L ∈ R^{d×r} (zero-initialised, as PEFT's
lora_B), R ∈ R^{k×r} (random, as PEFT's lora_A) and G the graph's generated left factor, given
per example so one batch can mix graphs. The LoRA scaling is 1 (PEFT lora_alpha = r).

Arms (same LM, same data, same training budget):
- ``frozen``        the LM alone (no trainable parameter);
- ``static_lora``   W = Ŵ + L Rᵀ, one adapter for every graph;
- ``prefix``        static LoRA plus the graph as one soft input token: MLP(MaxPool(GNN)) prepended
                    to the input embeddings (the input-level injection GaRA argues against);
- ``gara_no_norm``  W = Ŵ + (L + G_f) Rᵀ, the generated factor used as is;
- ``gara``          W = Ŵ + (L + Ĝ) Rᵀ with the norm constraint (`generator.norm_constrain`).
"""

from __future__ import annotations

import math

import torch
from paperworks.services.graph.gara.encoder import GraphBatch, GraphEncoder
from paperworks.services.graph.gara.generator import FactorGenerator, column_l1, norm_constrain
from torch import nn

ARMS = ("frozen", "static_lora", "prefix", "gara_no_norm", "gara")
GRAPH_ARMS = ("prefix", "gara_no_norm", "gara")
GENERATED_ARMS = ("gara_no_norm", "gara")


class LowRankLinear(nn.Module):
    """Ŵx + (L + G) Rᵀ x around a frozen `nn.Linear`; `generated` is (B, d_out, r) or None."""

    def __init__(self, base: nn.Linear, rank: int, generator: torch.Generator | None = None):
        super().__init__()
        self.base = base
        self.left = nn.Parameter(torch.zeros(base.out_features, rank))  # L  (PEFT lora_B)
        bound = 1.0 / math.sqrt(base.in_features)
        right = (torch.rand(base.in_features, rank, generator=generator) * 2 - 1) * bound
        self.right = nn.Parameter(right)  # R  (PEFT lora_A = Rᵀ)
        self.generated: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        u = x @ self.right.to(x.dtype)
        delta = u @ self.left.to(x.dtype).T
        if self.generated is not None:
            g = self.generated.to(x.dtype)
            delta = delta + (
                torch.einsum("btr,bor->bto", u, g) if x.dim() == 3 else torch.einsum("br,bor->bo", u, g)
            )
        return y + delta


def _key(name: str) -> str:
    return name.replace(".", "__")


class GaRAModel(nn.Module):
    """A frozen causal LM (transformers-style: `get_input_embeddings`, `inputs_embeds`, `.logits`)
    with one arm's adapters. `condition(graphs)` computes each graph's conditioning once (the
    generated factors, or the soft token); `forward` answers queries given it."""

    def __init__(
        self,
        lm: nn.Module,
        arm: str,
        feature_dim: int,
        targets=("q_proj", "v_proj"),
        rank: int = 4,
        hidden: int = 64,
        gnn_layers: int = 2,
        seed: int = 0,
        generator_init_std: float = 0.01,
    ):
        super().__init__()
        if arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, not {arm!r}")
        self.arm, self.rank, self.targets = arm, rank, tuple(targets)
        self.lm = lm
        for p in lm.parameters():
            p.requires_grad_(False)
        rng = torch.Generator().manual_seed(seed)
        self.adapted: dict[str, LowRankLinear] = {}
        if arm != "frozen":
            chosen = [(n, m) for n, m in lm.named_modules() if n.split(".")[-1] in self.targets]
            if not chosen:
                raise ValueError(f"no module of the LM is named one of {self.targets}")
            for name, module in chosen:
                if not isinstance(module, nn.Linear):
                    raise ValueError(f"{name} is a {type(module).__name__}, not nn.Linear")
                parent, leaf = (
                    lm.get_submodule(name.rpartition(".")[0]) if "." in name else lm,
                    name.split(".")[-1],
                )
                wrapped = LowRankLinear(module, rank, rng)
                setattr(parent, leaf, wrapped)
                self.adapted[name] = wrapped
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if arm in GRAPH_ARMS:
                self.encoder = GraphEncoder(feature_dim, hidden, gnn_layers)
            if arm in GENERATED_ARMS:
                shapes = {_key(n): m.base.out_features for n, m in self.adapted.items()}
                self.generator = FactorGenerator(hidden, shapes, rank, generator_init_std)
            if arm == "prefix":
                width = lm.get_input_embeddings().embedding_dim
                self.prefix = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, width))

    # ---- conditioning: once per graph -------------------------------------------------------
    def raw_factors(self, graphs: GraphBatch) -> dict[str, torch.Tensor]:
        """G_f per adapted module (name -> (G, d_out, r)), before any norm constraint."""
        out = self.generator(self.encoder(graphs))
        return {n: out[_key(n)] for n in self.adapted}

    def condition(self, graphs: GraphBatch | None):
        """What answering needs from each graph: {module: (G, d_out, r)} factors (gara arms, Ĝ for
        `gara`), a (G, width) soft token (`prefix`), or None (arms that ignore the graph)."""
        if self.arm in GENERATED_ARMS:
            raw = self.raw_factors(graphs)
            if self.arm == "gara_no_norm":
                return raw
            return {n: norm_constrain(g, self.adapted[n].left) for n, g in raw.items()}
        if self.arm == "prefix":
            return self.prefix(self.encoder(graphs))
        return None

    def norm_ratio(self, factors: dict[str, torch.Tensor]) -> float:
        """mean over modules and graphs of column_l1(G) / column_l1(L) (inf while L is still 0)."""
        ratios = []
        for n, g in factors.items():
            static = float(column_l1(self.adapted[n].left.detach()))
            ratios.append(float(column_l1(g.detach()).mean()) / static if static > 0 else float("inf"))
        return sum(ratios) / len(ratios)

    # ---- answering --------------------------------------------------------------------------
    def forward(self, input_ids, attention_mask, condition=None, graph_index=None) -> torch.Tensor:
        """Logits (B, T, V) for the token ids; `graph_index[b]` names example b's graph in `condition`."""
        try:
            if self.arm in GENERATED_ARMS:
                for n, m in self.adapted.items():
                    m.generated = condition[n][graph_index]
            if self.arm == "prefix":
                emb = self.lm.get_input_embeddings()(input_ids)
                token = condition[graph_index][:, None].to(emb.dtype)
                mask = torch.cat([attention_mask[:, :1], attention_mask], dim=1)
                return self.lm(inputs_embeds=torch.cat([token, emb], 1), attention_mask=mask).logits[:, 1:]
            return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits
        finally:
            for m in self.adapted.values():
                m.generated = None

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.named_parameters() if v.requires_grad}

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        params = dict(self.named_parameters())
        with torch.no_grad():
            for k, v in state.items():
                params[k].copy_(v)

    def static_factors(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """{module: (L, R)} of the static adapter."""
        return {n: (m.left.detach(), m.right.detach()) for n, m in self.adapted.items()}
