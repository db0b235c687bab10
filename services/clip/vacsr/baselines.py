"""The baselines VACSR is compared to, each over the same frozen features.

- `ZeroShot`: the frozen CLIP cosine similarity (nothing trained).
- `ResidualAdapter` + InfoNCE: CLIP-Adapter (Gao et al., IJCV 2024, arXiv 2110.04544): per modality a
  bottleneck MLP f -> ReLU(W2 ReLU(W1 f)) blended with the frozen feature, r * MLP(f) + (1 - r) * f,
  trained with CLIP's symmetric InfoNCE over the batch with a learnable temperature (Radford et al.
  2021, Eq. in Fig. 3).
- `ResidualAdapter` + sigmoid loss: the same adapter trained with SigLIP's pairwise sigmoid loss
  (Zhai et al., ICCV 2023, arXiv 2303.15343, Alg. 1): -1/|B| sum_ij log sigmoid(z_ij (t x_i.y_j + b)),
  z_ij = +1 on positives and -1 elsewhere, t = exp(t') and b learnable, initialised t' = log 10,
  b = -10.
- `PCMEAdapter`: a PCME++-style probabilistic embedding (Chun, ICLR 2024, arXiv 2210.04838): each
  modality maps to a Gaussian N(mu, diag sigma^2) with L2-normalised mu (the residual adapter above)
  and a log-variance head; the closed-form sampled distance
  d = ||mu_v - mu_t||^2 + ||sigma_v^2 + sigma_t^2||_1 (Eq. 2) gives the match probability
  sigmoid(-a d + b) trained with binary cross-entropy on every pair, plus the variational
  information bottleneck KL[N(mu, sigma^2) || N(0, I)] weighted 1e-4. Its pseudo-positives and
  mixed-sample augmentation are not used (the comparison is of the objectives). Its uncertainty
  of a pair is ||sigma_v^2||_1 + ||sigma_t^2||_1.

Every adapter exposes forward(img, txt) -> (score, uncertainty) over all pairs (uncertainty None
where the method has none), score_paired for row-aligned pairs, and loss(img, txt, labels).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class AdapterConfig:
    """`ratio` is CLIP-Adapter's residual blend r; `reduction` its bottleneck factor;
    `vib_beta` PCME++'s information-bottleneck weight."""

    feature_dim: int
    ratio: float = 0.2
    reduction: int = 4
    vib_beta: float = 1e-4

    def __post_init__(self):
        if self.feature_dim < 1 or self.reduction < 1:
            raise ValueError("feature_dim and reduction must be positive")
        if not 0.0 <= self.ratio <= 1.0:
            raise ValueError("ratio must lie in [0, 1]")

    def to_dict(self) -> dict:
        return asdict(self)


class ZeroShot(nn.Module):
    """Frozen CLIP: cosine similarity of the frozen features."""

    kind = "zero_shot"

    def __init__(self, config: AdapterConfig):
        super().__init__()
        self.config = config

    def forward(self, img, txt):
        return F.normalize(img, dim=-1) @ F.normalize(txt, dim=-1).T, None

    def score_paired(self, img, txt):
        return (F.normalize(img, dim=-1) * F.normalize(txt, dim=-1)).sum(-1), None


class Residual(nn.Module):
    """CLIP-Adapter's residual bottleneck on one modality, L2-normalised output."""

    def __init__(self, dim: int, reduction: int, ratio: float):
        super().__init__()
        self.ratio = ratio
        hidden = max(1, dim // reduction)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden, bias=False), nn.ReLU(),
                                 nn.Linear(hidden, dim, bias=False), nn.ReLU())

    def forward(self, f):
        f = F.normalize(f, dim=-1)
        return F.normalize(self.ratio * self.mlp(f) + (1 - self.ratio) * f, dim=-1)


class ResidualAdapter(nn.Module):
    """CLIP-Adapter on both towers; `objective` is "infonce" or "sigmoid"."""

    def __init__(self, config: AdapterConfig, objective: str):
        super().__init__()
        if objective not in ("infonce", "sigmoid"):
            raise ValueError(f"objective must be infonce or sigmoid, not {objective!r}")
        self.config, self.objective = config, objective
        self.kind = objective
        d = config.feature_dim
        self.image = Residual(d, config.reduction, config.ratio)
        self.text = Residual(d, config.reduction, config.ratio)
        if objective == "infonce":
            self.log_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
            self.bias = None
        else:
            self.log_scale = nn.Parameter(torch.tensor(math.log(10.0)))
            self.bias = nn.Parameter(torch.tensor(-10.0))

    def forward(self, img, txt):
        return self.image(img) @ self.text(txt).T, None

    def score_paired(self, img, txt):
        return (self.image(img) * self.text(txt)).sum(-1), None

    def loss(self, img, txt, labels, generator=None):
        cos = self.image(img) @ self.text(txt).T
        scale = self.log_scale.clamp(max=math.log(100.0)).exp()
        if self.objective == "infonce":
            return info_nce(scale * cos, labels), {"scale": float(scale.detach())}
        logits = scale * cos + self.bias
        signs = 2.0 * labels.to(logits.dtype) - 1.0
        loss = -F.logsigmoid(signs * logits).sum() / logits.shape[0]
        return loss, {"scale": float(scale.detach()), "bias": float(self.bias.detach())}


def info_nce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE; with several positives in a row/column (captions of one image) each
    positive's target mass is 1 / (#positives), the multi-positive form of the CLIP loss."""
    labels = labels.to(logits.dtype)
    rows, cols = labels.sum(1) > 0, labels.sum(0) > 0
    i2t = -(labels[rows] / labels[rows].sum(1, keepdim=True) * F.log_softmax(logits[rows], 1)).sum(1)
    t2i = -(labels[:, cols] / labels[:, cols].sum(0, keepdim=True)
            * F.log_softmax(logits[:, cols], 0)).sum(0)
    return 0.5 * (i2t.mean() + t2i.mean())


class PCMEAdapter(nn.Module):
    """PCME++-style probabilistic embeddings over the frozen features."""

    kind = "pcme"

    def __init__(self, config: AdapterConfig):
        super().__init__()
        self.config = config
        d = config.feature_dim
        self.image = Residual(d, config.reduction, config.ratio)
        self.text = Residual(d, config.reduction, config.ratio)
        hidden = max(1, d // config.reduction)
        self.image_logvar = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d))
        self.text_logvar = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d))
        nn.init.constant_(self.image_logvar[-1].bias, -5.0)
        nn.init.constant_(self.text_logvar[-1].bias, -5.0)
        self.a = nn.Parameter(torch.tensor(5.0))
        self.b = nn.Parameter(torch.tensor(5.0))

    def embed(self, img, txt):
        mv, mt = self.image(img), self.text(txt)
        lv = self.image_logvar(F.normalize(img, dim=-1)).clamp(-12.0, 4.0)
        lt = self.text_logvar(F.normalize(txt, dim=-1)).clamp(-12.0, 4.0)
        return mv, lv, mt, lt

    @staticmethod
    def csd(mv, lv, mt, lt):
        """Closed-form sampled distance of every image-text pair (Eq. 2): (B_i, B_t)."""
        sq = (mv.pow(2).sum(-1)[:, None] + mt.pow(2).sum(-1)[None, :] - 2 * mv @ mt.T).clamp_min(0)
        return sq + lv.exp().sum(-1)[:, None] + lt.exp().sum(-1)[None, :]

    def forward(self, img, txt):
        mv, lv, mt, lt = self.embed(img, txt)
        return -self.csd(mv, lv, mt, lt), lv.exp().sum(-1)[:, None] + lt.exp().sum(-1)[None, :]

    def score_paired(self, img, txt):
        mv, lv, mt, lt = self.embed(img, txt)
        d = (mv - mt).pow(2).sum(-1) + lv.exp().sum(-1) + lt.exp().sum(-1)
        return -d, lv.exp().sum(-1) + lt.exp().sum(-1)

    def loss(self, img, txt, labels, generator=None):
        mv, lv, mt, lt = self.embed(img, txt)
        logits = -self.a * self.csd(mv, lv, mt, lt) + self.b
        bce = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        vib = 0.5 * (torch.cat([mv, mt]).pow(2) + torch.cat([lv, lt]).exp() - 1 - torch.cat([lv, lt]))
        vib = vib.sum(-1).mean()
        return bce + self.config.vib_beta * vib, {"a": float(self.a.detach()), "b": float(self.b.detach())}
