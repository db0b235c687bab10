"""Pieces every relation model shares: the union-box encoder, the frequency prior, classifiers.

- `UnionEncoder` is the benchmark's relation feature extractor in miniature: the
  union box's RoIAlign features plus the two "rect" masks that mark where the
  subject and object lie inside the union box (Zellers et al., MOTIFS, sec. 4),
  projected to one vector per pair.
- `FrequencyPrior` is MOTIFS' frequency bias: an embedding of the (subject class,
  object class) pair initialized with log p(predicate | subject, object) counted
  on the training annotations (background = unannotated pairs) and trained on.
- `PrototypeClassifier` scores a representation by cosine similarity to
  learned predicate prototypes at a learned temperature (PE-Net, Zheng et al.
  CVPR 2023, eq. 8), with PE-Net's prototype regularizers.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
import torch.nn.functional as F
from paperworks.services.scenegraph.sgg.features import UNION_POOL, Features
from paperworks.services.scenegraph.sgg.geometry import union_boxes
from paperworks.services.scenegraph.sgg.sample import Sample
from torch import nn


def pair_mask(feats: Features) -> torch.Tensor:
    """[B, N, N] bool: ordered pairs of two distinct, present objects."""
    return feats.rel_labels >= 0


@dataclass(frozen=True)
class Pairs:
    """The ordered pairs of two distinct present objects, packed as P rows in (image, subject, object)
    order: every relation head computes on these rows, not on the padded N x N grid, three quarters of
    which hold no pair at the synthetic scenes' sizes (measured: 26% of the grid is pairs). Only the
    cross-stream attention, which needs an image's pairs side by side, goes back to a grid (`grid`),
    and that one only as wide as the batch's most crowded image."""

    image: torch.Tensor  # [P]
    subj: torch.Tensor  # [P]
    obj: torch.Tensor  # [P]
    images: int
    objects: int  # the token grid's width: the most objects any image of the batch has

    @classmethod
    def of(cls, feats: Features) -> Pairs:
        b, i, j = pair_mask(feats).nonzero(as_tuple=True)
        objects = int(torch.maximum(i.max(), j.max())) + 1 if len(b) else 1
        return cls(b, i, j, len(feats), objects)

    def __len__(self) -> int:
        return len(self.image)

    def rows(self, s: torch.Tensor, o: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, N, ...] per-object rows -> the subject's row of s and the object's row of o (o = s if not
        given) for every pair: two [P, ...]."""
        o = s if o is None else o
        return s[self.image, self.subj], o[self.image, self.obj]

    def select(self, grid: torch.Tensor) -> torch.Tensor:
        """[B, N, N, ...] -> [P, ...]."""
        return grid[self.image, self.subj, self.obj]

    @cached_property
    def token(self) -> torch.Tensor:
        """[P]: each pair's position among its image's objects * objects pair tokens (computed once:
        both fusion directions and every `grid` use it)."""
        return self.subj * self.objects + self.obj

    def grid(self, rows: torch.Tensor) -> torch.Tensor:
        """[P, D] -> [B, objects * objects, D] pair tokens, zero where there is no pair."""
        out = rows.new_zeros(self.images, self.objects * self.objects, *rows.shape[1:])
        out[self.image, self.token] = rows
        return out

    @cached_property
    def padding(self) -> torch.Tensor:
        """[B, objects * objects] bool: tokens that hold no pair (an image without pairs keeps token 0
        as a key, so attention over it stays defined)."""
        pad = torch.ones(self.images, self.objects * self.objects, dtype=torch.bool, device=self.image.device)
        pad[self.image, self.token] = False
        pad[pad.all(1), 0] = False
        return pad


def rect_masks(s: torch.Tensor, o: torch.Tensor, pool: int = UNION_POOL) -> torch.Tensor:
    """[P, 4] subject and object boxes -> [P, 2, pool, pool]: each box inside the pair's union box."""
    u = union_boxes(s, o)
    steps = (torch.arange(pool, dtype=s.dtype, device=s.device) + 0.5) / pool
    xs = u[..., 0:1] + steps * (u[..., 2:3] - u[..., 0:1])  # [P, pool]
    ys = u[..., 1:2] + steps * (u[..., 3:4] - u[..., 1:2])

    def inside(b):
        in_x = (xs >= b[..., 0:1]) & (xs <= b[..., 2:3])
        in_y = (ys >= b[..., 1:2]) & (ys <= b[..., 3:4])
        return (in_y[..., :, None] & in_x[..., None, :]).to(s.dtype)

    return torch.stack([inside(s), inside(o)], -3)


class UnionEncoder(nn.Module):
    def __init__(self, channels: int, out_dim: int):
        super().__init__()
        self.proj = nn.Sequential(nn.Linear((channels + 2) * UNION_POOL**2, out_dim), nn.ReLU())

    def forward(self, feats: Features, pairs: Pairs) -> torch.Tensor:
        """[P, out_dim]."""
        x = torch.cat([pairs.select(feats.union_feats).float(), rect_masks(*pairs.rows(feats.boxes))], 1)
        return self.proj(x.flatten(1))


def predicate_counts(samples: list[Sample], num_classes: int, num_predicates: int) -> torch.Tensor:
    """[C, C, R] counts over ground-truth pairs; index 0 counts pairs without an annotation."""
    counts = torch.zeros(num_classes, num_classes, num_predicates)
    for s in samples:
        labels = torch.from_numpy(s.labels)
        n = len(labels)
        related = torch.zeros(n, n, dtype=torch.bool)
        for i, j, p in s.relations.tolist():
            counts[labels[i], labels[j], p] += 1
            related[i, j] = True
        for i in range(n):
            for j in range(n):
                if i != j and not related[i, j]:
                    counts[labels[i], labels[j], 0] += 1
    return counts


class FrequencyPrior(nn.Module):
    def __init__(self, counts: torch.Tensor, eps: float = 1e-3):
        super().__init__()
        c, _, r = counts.shape
        self.num_classes = c
        log_p = torch.log((counts + eps) / (counts + eps).sum(-1, keepdim=True))
        self.table = nn.Embedding(c * c, r)
        with torch.no_grad():
            self.table.weight.copy_(log_p.view(c * c, r))

    def forward(self, subj_labels: torch.Tensor, obj_labels: torch.Tensor) -> torch.Tensor:
        """[P] subject and object labels -> [P, R] log-prior."""
        return self.table(subj_labels * self.num_classes + obj_labels)


class LinearClassifier(nn.Module):
    def __init__(self, dim: int, num_out: int):
        super().__init__()
        self.fc = nn.Linear(dim, num_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)

    def regularizer(self) -> torch.Tensor:
        return self.fc.weight.new_zeros(())


class PrototypeClassifier(nn.Module):
    """cos(W r, W c_p) / tau over predicate prototypes c_p (PE-Net's prototype-guided learning)."""

    def __init__(self, dim: int, num_out: int, proto_dim: int = 64, margin: float = 2.0):
        super().__init__()
        self.prototypes = nn.Parameter(torch.randn(num_out, proto_dim) * 0.5)
        self.w_pred = nn.Sequential(nn.Linear(proto_dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.project = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.logit_scale = nn.Parameter(torch.tensor(1 / 0.07).log())
        self.margin = margin

    def protos(self) -> torch.Tensor:
        return self.project(F.relu(self.w_pred(self.prototypes)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = F.normalize(self.project(F.relu(x)), dim=-1)
        return r @ F.normalize(self.protos(), dim=-1).t() * self.logit_scale.clamp(max=4.6).exp()

    def regularizer(self) -> torch.Tensor:
        """PE-Net's prototype regularization: the l2,1 norm of the prototype similarity matrix
        and a margin on each prototype's distance to its nearest other prototype (eqs. 10-11)."""
        c = self.protos()
        cn = F.normalize(c, dim=-1)
        sim = cn @ cn.detach().t()
        l21 = sim.norm(dim=1).sum() / sim.numel()
        dist = torch.cdist(c, c.detach()) ** 2
        dist = dist + torch.eye(len(c), dtype=c.dtype, device=c.device) * 1e6
        nearest = dist.min(dim=1).values
        return l21 + F.relu(self.margin - nearest).mean()
