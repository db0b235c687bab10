"""DS-Net: the Dual-stream Synergistic Network predicate head (ICML 2026).

Only the paper's abstract is public. What it states, and this head does:
biased SGG models over-predict geometric predicates partly because geometric
and non-geometric predicates that co-occur get entangled representations, so
DS-Net models them in two streams with bidirectional fusion, as a plug-in
predicate head for existing SGG models:

- space stream: pair geometry (relative offsets, log scale ratios, IoU and
  overlap ratios, distance, angle, areas; `dsnet.geometry.pair_geometry`) plus layout
  context over the image's objects: a small transformer over box + class tokens;
- vision stream: the base model's subject/object representations paired its
  own way (MOTIFS: post_cat of head and tail; PE-Net: F(s, o)), the union-box
  RoI feature, class embeddings, and, where the base model's own predictor has
  one (MOTIFS' frequency bias; PE-Net has none), the frequency prior
  log p(r | s, o): a plug-in head keeps what the base predicts with, no more;
- bidirectional cross-stream fusion: over the image's pair tokens, the space
  stream attends to the vision stream and the vision stream to the space stream
  (multi-head cross-attention each way, residual, optionally gated by
  sigmoid(W [x ; attended])), then a feed-forward block per stream; each head's
  score for the same pair's token gets a bonus (`CrossFusion`), so a pair fuses
  with its own counterpart rather than an image-wide average;
- geometric predicate logits come from the space stream, non-geometric ones
  from the vision stream, merged into one distribution; each stream also has
  an auxiliary loss.

Design choices (the abstract does not fix them): each stream's classifier
scores the background plus its own predicate group, and that is the stream's
auxiliary loss: cross-entropy over {background} + own group on the pairs
labelled background or with a predicate of that group (a pair labelled with the
other group's predicate is no negative for this stream). The streams merge as
p(bg) = Ps(bg) Pv(bg), p(g) = Ps(g) Pv(bg), p(n) = Pv(n) (a geometric predicate
is what holds when no interaction does), one distribution trained with
cross-entropy at weight `main_weight` = 0.3 beside the auxiliary losses at 1
(measured on the synthetic scenes: at weight 1 the merged loss pulls the
vision stream back toward the label bias). The classifier is the base model's
kind (linear for MOTIFS, prototype cosine for PE-Net). One fusion layer, one
layout-transformer layer, width 64. Where the model is given per-object visual
attributes (the detector's depth-order estimates, `sgg/depth_order.py`), the vision
stream's pair token adds a projection of the (subject's, object's) estimates after
its MLP: they are evidence from the pixels, so the space stream, which scores
"in front of" / "behind", gets them only through the vision -> space fusion
(put before the MLP, they were washed out: the vision stream's own losses do not
need them).

Ablations: `streams="single"` runs one stream over the concatenated space and
vision inputs (self-attention over pairs in place of the cross-stream fusion)
that emits both groups' logits; `streams="vision"` the same over the vision inputs
alone; `fusion="space_to_vision"` (the vision stream attends to the space stream) /
`"vision_to_space"` keeps only one direction of the fusion, `"none"` neither.
"""
from __future__ import annotations

from typing import Literal

import torch
from paperworks.services.scenegraph.dsnet.geometry import PAIR_GEOMETRY_DIM, pair_geometry
from paperworks.services.scenegraph.sgg.components import (
    FrequencyPrior,
    LinearClassifier,
    Pairs,
    PrototypeClassifier,
)
from paperworks.services.scenegraph.sgg.features import Features
from paperworks.services.scenegraph.sgg.geometry import BOX_ENCODING_DIM, box_encoding
from pydantic import BaseModel, Field
from torch import nn


class DSNetConfig(BaseModel):
    streams: Literal["dual", "single", "vision"] = "dual"
    fusion: Literal["bidirectional", "space_to_vision", "vision_to_space", "none"] = "bidirectional"
    gated: bool = True
    dim: int = Field(default=64, ge=8, le=512)
    heads: int = Field(default=4, ge=1, le=16)
    layout_layers: int = Field(default=1, ge=0, le=4)
    aux_weight: float = Field(default=1.0, ge=0, le=10)
    main_weight: float = Field(default=0.3, ge=0, le=10)


def _mlp(din: int, dout: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(din, dout), nn.ReLU(), nn.Linear(dout, dout), nn.LayerNorm(dout))


class CrossFusion(nn.Module):
    """x' = LN(x + g * MHA(q=x, k=y, v=y)), g = sigmoid(W [x ; MHA]) when gated, then x' + FFN(x').

    Token t of x and token t of y describe the same pair, but plain attention has nothing to tell that
    key from the image's other pairs: trained, it spread its weight evenly (own pair 0.07 against
    1/n = 0.07), so the fusion carried an image-wide average and no pair-specific information. Each
    head therefore adds log(n - 1) + b_h (b_h learned, from 0) to its score for the same pair: at the
    start that pair weighs as much as the n - 1 others together."""

    def __init__(self, dim: int, heads: int, gated: bool):
        super().__init__()
        self.heads = heads
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.same_pair = nn.Parameter(torch.zeros(heads))
        self.gate = nn.Linear(2 * dim, dim) if gated else None
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))

    def scores_bias(self, key_padding: torch.Tensor) -> torch.Tensor:
        """[B * heads, L, L] additive scores: -inf on padded keys, the same-pair bonus on the diagonal."""
        b, n = key_padding.shape
        others = (~key_padding).sum(1).clamp(min=2).to(self.same_pair.dtype) - 1
        eye = torch.eye(n, dtype=self.same_pair.dtype, device=key_padding.device)
        bonus = (others.log()[:, None] + self.same_pair[None, :])[:, :, None, None] * eye  # [B, H, L, L]
        bonus = bonus.masked_fill(key_padding[:, None, None, :], float("-inf"))
        return bonus.reshape(b * self.heads, n, n)

    def forward(self, x: torch.Tensor, y: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        """[P, dim] pair tokens x attend to y over their image's pairs -> [P, dim]."""
        yg = pairs.grid(y)
        a, _ = self.attn(pairs.grid(x), yg, yg, attn_mask=self.scores_bias(pairs.padding),
                         need_weights=False)
        a = a[pairs.image, pairs.token]
        if self.gate is not None:
            a = torch.sigmoid(self.gate(torch.cat([x, a], -1))) * a
        x = self.norm1(x + a)
        return self.norm2(x + self.ffn(x))


class DSNetHead(nn.Module):
    def __init__(self, cfg: DSNetConfig, context: nn.Module, union_dim: int, num_classes: int,
                 geometric_ids: list[int], non_geometric_ids: list[int], prior: FrequencyPrior | None,
                 classifier: Literal["linear", "prototype"], attributes: int = 0):
        super().__init__()
        d = cfg.dim
        self.cfg, self.context, self.prior = cfg, context, prior
        self.register_buffer("geo_ids", torch.tensor(geometric_ids, dtype=torch.long), persistent=False)
        self.register_buffer("ng_ids", torch.tensor(non_geometric_ids, dtype=torch.long), persistent=False)
        self.num_predicates = 1 + len(geometric_ids) + len(non_geometric_ids)
        # space stream inputs
        self.box_token = nn.Linear(BOX_ENCODING_DIM, d)
        self.space_class = nn.Embedding(num_classes, d)
        layer = nn.TransformerEncoderLayer(d, cfg.heads, 2 * d, dropout=0.0, batch_first=True)
        self.layout = nn.TransformerEncoder(layer, cfg.layout_layers, enable_nested_tensor=False) \
            if cfg.layout_layers else None
        self.geom = nn.Sequential(nn.Linear(PAIR_GEOMETRY_DIM, d), nn.ReLU())
        space_in = 3 * d
        # vision stream inputs
        self.vision_class = nn.Embedding(num_classes, d // 2)
        vision_in = context.pair_dim + union_dim + d
        make = (lambda n: LinearClassifier(d, n)) if classifier == "linear" else \
            (lambda n: PrototypeClassifier(d, n))
        if cfg.streams == "dual":
            self.space_mlp, self.vision_mlp = _mlp(space_in, d), _mlp(vision_in, d)
            self.space_fusion = CrossFusion(d, cfg.heads, cfg.gated) \
                if cfg.fusion in ("bidirectional", "vision_to_space") else None
            self.vision_fusion = CrossFusion(d, cfg.heads, cfg.gated) \
                if cfg.fusion in ("bidirectional", "space_to_vision") else None
        else:
            self.single_mlp = _mlp(vision_in + (space_in if cfg.streams == "single" else 0), d)
            self.single_fusion = CrossFusion(d, cfg.heads, cfg.gated)
        # the pair's visual attributes (subject's, object's), added to the vision-side token
        self.vision_attributes = nn.Linear(2 * attributes, d) if attributes else None
        self.space_classifier = make(1 + len(geometric_ids))
        self.vision_classifier = make(1 + len(non_geometric_ids))

    def _space_input(self, feats: Features, pairs: Pairs) -> torch.Tensor:
        tokens = self.box_token(box_encoding(feats.boxes, feats.image_size)) + self.space_class(feats.labels)
        if self.layout is not None:
            padding = ~feats.valid
            padding[padding.all(1), 0] = False  # an empty image still needs one key
            tokens = self.layout(tokens, src_key_padding_mask=padding)
        geom = self.geom(pair_geometry(*pairs.rows(feats.boxes), feats.image_size))
        return torch.cat([geom, *pairs.rows(tokens)], -1)

    def _vision_input(self, feats: Features, union: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        subj, obj = self.context(feats)
        pair = self.context.pair(*pairs.rows(subj, obj))
        return torch.cat([pair, union, *pairs.rows(self.vision_class(feats.labels))], -1)

    def _with_attributes(self, token: torch.Tensor, feats: Features, pairs: Pairs) -> torch.Tensor:
        if self.vision_attributes is None:
            return token
        return token + self.vision_attributes(torch.cat(pairs.rows(feats.attributes), -1))

    def forward(self, feats: Features, union: torch.Tensor, pairs: Pairs) -> dict[str, torch.Tensor]:
        """Per pair (rows of `pairs`): merged logits [P, R], each stream's {background} + group logits."""
        space_in = self._space_input(feats, pairs) if self.cfg.streams != "vision" else None
        vision_in = self._vision_input(feats, union, pairs)
        if self.cfg.streams == "dual":
            s = self.space_mlp(space_in)
            v = self._with_attributes(self.vision_mlp(vision_in), feats, pairs)
            s2 = self.space_fusion(s, v, pairs) if self.space_fusion is not None else s
            v2 = self.vision_fusion(v, s, pairs) if self.vision_fusion is not None else v
        else:
            x = torch.cat([space_in, vision_in], -1) if self.cfg.streams == "single" else vision_in
            x = self._with_attributes(self.single_mlp(x), feats, pairs)
            s2 = v2 = self.single_fusion(x, x, pairs)
        space = self.space_classifier(s2)
        vision = self.vision_classifier(v2)
        if self.prior is not None:
            vision_ids = torch.cat([self.ng_ids.new_zeros(1), self.ng_ids])
            vision = vision + self.prior(*pairs.rows(feats.labels))[:, vision_ids]
        ls, lv = space.log_softmax(-1), vision.log_softmax(-1)
        logits = space.new_empty(len(pairs), self.num_predicates)
        # p(bg) = Ps(bg) Pv(bg), p(g) = Ps(g) Pv(bg), p(n) = Pv(n): a distribution that sums to 1
        logits[..., 0] = ls[..., 0] + lv[..., 0]
        logits[..., self.geo_ids] = ls[..., 1:] + lv[..., :1]
        logits[..., self.ng_ids] = lv[..., 1:]
        reg = self.space_classifier.regularizer() + self.vision_classifier.regularizer()
        return {"logits": logits, "aux_space": space, "aux_vision": vision, "regularizer": reg}
