"""A relation model: union encoder + base context (MOTIFS or PE-Net) + predicate head.

`head="original"` is the base model's own predictor; `head="dsnet"` plugs the
DS-Net head onto the same context (the head replaces the predictor, the context
stays). The training loss is cross-entropy over all ordered pairs of present
objects (background included), plus, for DS-Net, each stream's auxiliary loss
and, for prototype classifiers, PE-Net's prototype regularizer.

The frequency prior log p(r | s, o) goes where the base model's own predictor puts
it, and only there: MOTIFS adds its frequency bias to the logits (Zellers et al.,
eq. 6); PE-Net's `PrototypeEmbeddingNetwork` (github.com/VL-Group/PENET) adds none.
So both heads on one base get the same prior (the DS-Net head adds it to its vision
stream), and a gain of the head over the base's own predictor is not the prior's.
`RelationConfig.frequency_prior` overrides the base's choice for both heads alike.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F
from paperworks.services.scenegraph.baselines.motifs import MotifsContext, MotifsPredictor
from paperworks.services.scenegraph.baselines.penet import PENetContext, PENetPredictor
from paperworks.services.scenegraph.dsnet import DSNetConfig, DSNetHead
from paperworks.services.scenegraph.sgg.components import FrequencyPrior, Pairs, UnionEncoder
from paperworks.services.scenegraph.sgg.features import OBJ_POOL, Features
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from pydantic import BaseModel, Field
from torch import nn

REGULARIZER_WEIGHT = 0.1


class RelationConfig(BaseModel):
    base: Literal["motifs", "penet"] = "motifs"
    head: Literal["original", "dsnet"] = "dsnet"
    dsnet: DSNetConfig = Field(default_factory=DSNetConfig)
    hidden: int = Field(default=64, ge=8, le=512)
    union_dim: int = Field(default=128, ge=8, le=1024)
    attributes: int = Field(default=0, ge=0, le=8, description="per-object attribute estimates (depth order)")
    frequency_prior: bool | None = Field(default=None, description="None: as the base model's own predictor "
                                                                   "(MOTIFS yes, PE-Net no)")

    @property
    def uses_frequency_prior(self) -> bool:
        return self.base == "motifs" if self.frequency_prior is None else self.frequency_prior


def _cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy that is 0, not NaN, over no pairs (a batch where nothing was detected)."""
    return F.cross_entropy(logits, target, reduction="sum") / max(len(target), 1)


class RelationModel(nn.Module):
    def __init__(self, cfg: RelationConfig, vocab: Vocabulary, counts: torch.Tensor,
                 coarse_channels: int, fine_channels: int):
        super().__init__()
        self.cfg = cfg
        obj_dim = coarse_channels * OBJ_POOL * OBJ_POOL + cfg.attributes
        self.num_predicates = vocab.num_predicates
        self.union = UnionEncoder(fine_channels, cfg.union_dim)
        self.prior = FrequencyPrior(counts) if cfg.uses_frequency_prior else None
        if cfg.base == "motifs":
            context = MotifsContext(obj_dim, vocab.num_classes, cfg.hidden)
        else:
            context = PENetContext(obj_dim, vocab.num_classes, cfg.hidden)
        if cfg.head == "dsnet":
            self.head = DSNetHead(cfg.dsnet, context, cfg.union_dim, vocab.num_classes, vocab.geometric_ids,
                                  vocab.non_geometric_ids, self.prior,
                                  "linear" if cfg.base == "motifs" else "prototype", cfg.attributes)
        elif cfg.base == "motifs":
            self.head = MotifsPredictor(context, cfg.union_dim, vocab.num_predicates, self.prior)
        else:
            self.head = PENetPredictor(context, cfg.union_dim, vocab.num_predicates, self.prior)
        # full predicate id -> index in a stream's {background} + group, or -1
        r = vocab.num_predicates
        for name, ids in (("space_map", vocab.geometric_ids), ("vision_map", vocab.non_geometric_ids)):
            table = torch.full((r,), -1, dtype=torch.long)
            table[0] = 0
            table[torch.tensor(ids, dtype=torch.long)] = torch.arange(1, len(ids) + 1)
            self.register_buffer(name, table, persistent=False)

    def forward(self, feats: Features) -> dict[str, torch.Tensor]:
        """Per pair, in `Pairs.of(feats)` order: "logits" [P, R] (and the DS-Net streams' logits)."""
        pairs = Pairs.of(feats)
        return self.head(feats, self.union(feats, pairs), pairs)

    def loss(self, feats: Features, out: dict[str, torch.Tensor]) -> torch.Tensor:
        labels = Pairs.of(feats).select(feats.rel_labels)
        loss = _cross_entropy(out["logits"], labels)
        if "aux_space" in out:
            loss = loss * self.cfg.dsnet.main_weight
            aux = 0.0
            for key, table in (("aux_space", self.space_map), ("aux_vision", self.vision_map)):
                target = table[labels]
                keep = target >= 0
                aux = aux + _cross_entropy(out[key][keep], target[keep])
            loss = loss + self.cfg.dsnet.aux_weight * aux
        if "regularizer" in out:
            loss = loss + REGULARIZER_WEIGHT * out["regularizer"]
        return loss

    @torch.no_grad()
    def predicate_scores(self, feats: Features, batch_size: int = 64) -> torch.Tensor:
        """[B, N, N, R] softmax over predicates (background at 0); zero where there is no pair."""
        self.eval()
        n = feats.labels.shape[1]
        scores = feats.boxes.new_zeros(len(feats), n, n, self.num_predicates)
        for i in range(0, len(feats), batch_size):
            rows = torch.arange(i, min(i + batch_size, len(feats)), device=scores.device)
            chunk = feats.take(rows)
            pairs = Pairs.of(chunk)
            scores[rows[pairs.image], pairs.subj, pairs.obj] = self(chunk)["logits"].softmax(-1)
        return scores


def train_relation_model(model: RelationModel, feats: Features, epochs: int, seed: int,
                         batch_size: int = 16, lr: float = 2e-3,
                         on_epoch: Callable[[int, float], None] | None = None) -> RelationModel:
    """Trains `model` on `feats` where both are (one device); the shuffling draws from a CPU generator."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4, foreach=True)
    steps = epochs * math.ceil(len(feats) / batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.15)
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(len(feats), generator=gen, device=gen.device).to(feats.boxes.device)
        total = 0.0
        for start in range(0, len(feats), batch_size):
            batch = feats.take(order[start:start + batch_size])
            loss = model.loss(batch, model(batch))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0, foreach=True)
            opt.step()
            sched.step()
            total += loss.item() * len(batch)
        if on_epoch is not None:
            on_epoch(epoch, total / len(feats))
    model.eval()
    return model
