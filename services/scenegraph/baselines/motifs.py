"""MOTIFS-style base model (Zellers et al., "Neural Motifs", CVPR 2018), as in
Scene-Graph-Benchmark.pytorch's `LSTMContext` + `MotifPredictor`.

Context: objects sorted left to right ("leftright" order) run through a BiLSTM
over [RoI feature, class embedding, box embedding] (object context), then a
second BiLSTM over [class embedding, object context] (edge context). The edge
context is projected to a head (subject) and a tail (object) representation.
Original predictor: logits = W [post_cat(head_i ; tail_j) * union_ij] +
frequency bias(label_i, label_j) (their eq. 6: the frequency baseline plus a
learned residual).

Design choices: object labels come from the detector / box classifier instead
of MOTIFS' label-decoding LSTM; dimensions are small.
"""
from __future__ import annotations

import torch
from paperworks.services.scenegraph.sgg.components import FrequencyPrior, Pairs
from paperworks.services.scenegraph.sgg.features import Features
from paperworks.services.scenegraph.sgg.geometry import BOX_ENCODING_DIM, box_encoding
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def _bilstm(x: torch.Tensor, lengths: torch.Tensor, lstm: nn.LSTM) -> torch.Tensor:
    packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
    out, _ = lstm(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out


class MotifsContext(nn.Module):
    def __init__(self, obj_dim: int, num_classes: int, hidden: int = 64, embed: int = 32):
        super().__init__()
        self.obj_embed1 = nn.Embedding(num_classes, embed)
        self.obj_embed2 = nn.Embedding(num_classes, embed)
        self.pos_embed = nn.Sequential(nn.Linear(BOX_ENCODING_DIM, 32), nn.ReLU(),
                                       nn.Linear(32, 64), nn.ReLU())
        self.roi_proj = nn.Sequential(nn.Linear(obj_dim, 128), nn.ReLU())
        self.obj_ctx_rnn = nn.LSTM(128 + embed + 64, hidden, batch_first=True, bidirectional=True)
        self.lin_obj = nn.Linear(2 * hidden, hidden)
        self.edge_ctx_rnn = nn.LSTM(embed + hidden, hidden, batch_first=True, bidirectional=True)
        self.lin_edge = nn.Linear(2 * hidden, hidden)
        self.post_emb = nn.Linear(hidden, 2 * hidden)
        self.post_cat = nn.Linear(2 * hidden, hidden * 2)
        self.dim = hidden
        self.pair_dim = hidden * 2

    def forward(self, feats: Features) -> tuple[torch.Tensor, torch.Tensor]:
        """Head and tail representations [B, N, hidden]."""
        centre_x = (feats.boxes[..., 0] + feats.boxes[..., 2]) / 2
        order = torch.where(feats.valid, centre_x, torch.full_like(centre_x, 1e9)).argsort(dim=1)
        inverse = order.argsort(dim=1)
        lengths = feats.valid.sum(1)

        def sort(t):
            return t.gather(1, order[..., None].expand_as(t))

        def unsort(t):
            return t.gather(1, inverse[..., None].expand_as(t))

        x = torch.cat([self.roi_proj(feats.object_inputs()), self.obj_embed1(feats.labels),
                       self.pos_embed(box_encoding(feats.boxes, feats.image_size))], -1)
        obj_ctx = self.lin_obj(_bilstm(sort(x), lengths, self.obj_ctx_rnn))
        edge_in = torch.cat([sort(self.obj_embed2(feats.labels)), obj_ctx], -1)
        edge_ctx = unsort(self.lin_edge(_bilstm(edge_in, lengths, self.edge_ctx_rnn)))
        head, tail = self.post_emb(edge_ctx).chunk(2, -1)
        return head, tail

    def pair(self, head: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
        """[P, hidden] subject-head and object-tail rows -> [P, pair_dim]."""
        return self.post_cat(torch.cat([head, tail], -1))


class MotifsPredictor(nn.Module):
    """The original MOTIFS head: pair context times union feature, linear, plus frequency bias (unless
    `RelationConfig.frequency_prior` turns it off)."""

    def __init__(self, context: MotifsContext, union_dim: int, num_predicates: int,
                 prior: FrequencyPrior | None):
        super().__init__()
        self.context = context
        self.up_dim = nn.Linear(union_dim, context.pair_dim)
        self.rel_compress = nn.Linear(context.pair_dim, num_predicates)
        self.freq_bias = prior

    def forward(self, feats: Features, union: torch.Tensor, pairs: Pairs) -> dict[str, torch.Tensor]:
        head, tail = self.context(feats)
        rep = self.context.pair(*pairs.rows(head, tail)) * self.up_dim(union)
        logits = self.rel_compress(rep)
        if self.freq_bias is not None:
            logits = logits + self.freq_bias(*pairs.rows(feats.labels))
        return {"logits": logits}
