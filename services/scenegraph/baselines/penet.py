"""PE-Net-style base model (Zheng et al., "Prototype-based Embedding Network for Scene
Graph Generation", CVPR 2023), following the structure of their `PrototypeEmbeddingNetwork`.

Entities: s = W_s t_s + g_s * h(x_s), o = W_o t_o + g_o * h(x_o) (eqs. 3-4): a class
embedding t plus the gated, semantically projected visual feature x, with a
residual layer-norm block. Relation: r = F(s, o) - g_p * h(x_u) with the fusion
F(x, y) = ReLU(x + y) - (x - y)^2 (eqs. 5-6). Predicates are matched to prototypes
c_p = W_p t_p by cosine similarity at a learned temperature (eq. 8), trained
with cross-entropy plus prototype regularization (eqs. 10-11).

Design choices: the class and predicate embeddings are learned from scratch
(no GloVe vectors offline); dimensions are small; PE-Net's Euclidean
prototype-learning term is left out (the cross-entropy on cosine scores is kept).
Like the authors' `PrototypeEmbeddingNetwork`, the head adds no frequency prior; one is
added only where `RelationConfig.frequency_prior` asks for it (then to both heads alike).
"""
from __future__ import annotations

import torch
from paperworks.services.scenegraph.sgg.components import FrequencyPrior, Pairs, PrototypeClassifier
from paperworks.services.scenegraph.sgg.features import Features
from torch import nn


def fusion(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.relu(x + y) - (x - y) ** 2


class _Entity(nn.Module):
    def __init__(self, embed: int, dim: int):
        super().__init__()
        self.w_embed = nn.Sequential(nn.Linear(embed, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.gate = nn.Linear(2 * dim, dim)
        self.linear = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, t: torch.Tensor, sem: torch.Tensor) -> torch.Tensor:
        e = self.w_embed(t)
        x = e + sem * torch.sigmoid(self.gate(torch.cat([e, sem], -1)))
        return self.norm(torch.relu(self.linear(x)) + x)


class PENetContext(nn.Module):
    def __init__(self, obj_dim: int, num_classes: int, dim: int = 64, embed: int = 32):
        super().__init__()
        self.obj_embed = nn.Embedding(num_classes, embed)
        self.post_emb = nn.Linear(obj_dim, 2 * dim)
        self.vis2sem = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.subject, self.object = _Entity(embed, dim), _Entity(embed, dim)
        self.dim = self.pair_dim = dim

    def forward(self, feats: Features) -> tuple[torch.Tensor, torch.Tensor]:
        """Subject-role and object-role entity representations [B, N, dim]."""
        sub_vis, obj_vis = self.post_emb(feats.object_inputs()).chunk(2, -1)
        t = self.obj_embed(feats.labels)
        return self.subject(t, self.vis2sem(sub_vis)), self.object(t, self.vis2sem(obj_vis))

    def pair(self, s: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        """[P, dim] subject and object rows -> [P, dim]."""
        return fusion(s, o)


class PENetPredictor(nn.Module):
    """The original PE-Net head: r = F(s, o) - g_p * h(x_u), cosine to predicate prototypes (+ the
    frequency prior log p(r | s, o) where one is given)."""

    def __init__(self, context: PENetContext, union_dim: int, num_predicates: int,
                 prior: FrequencyPrior | None = None):
        super().__init__()
        d = context.dim
        self.context = context
        self.down = nn.Sequential(nn.Linear(union_dim, d), nn.ReLU(), nn.Linear(d, d))
        self.gate = nn.Linear(2 * d, d)
        self.linear = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.classifier = PrototypeClassifier(d, num_predicates)
        self.prior = prior

    def forward(self, feats: Features, union: torch.Tensor, pairs: Pairs) -> dict[str, torch.Tensor]:
        s, o = self.context(feats)
        so = self.context.pair(*pairs.rows(s, o))
        u = self.context.vis2sem(self.down(union))
        r = so - u * torch.sigmoid(self.gate(torch.cat([so, u], -1)))
        r = self.norm(torch.relu(self.linear(r)) + r)
        logits = self.classifier(r)
        if self.prior is not None:
            logits = logits + self.prior(*pairs.rows(feats.labels))
        return {"logits": logits, "regularizer": self.classifier.regularizer()}
