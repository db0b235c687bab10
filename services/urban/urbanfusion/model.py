"""UrbanFusion: stochastic multimodal fusion of location modalities (Mühlematter et al., ICML 2026,
arXiv 2510.13774, §3).

- Tokens (§3.1): each present modality's frozen, normalized features pass a linear
  projection to width D; coordinates pass the location encoder (`location.py`). A learned
  modality embedding is added to each token.
- Stochastic multimodal fusion (§3.2): per location, two random subsets ("views") of the
  present modalities are drawn (`sample_views`); each view's tokens go through a Transformer
  encoder with the absent tokens masked out, and are average-pooled into the location's
  embedding h. At inference any non-empty subset works, coordinates alone included.
- Objective (§3.3): L = (1 - lambda) L_CL + lambda L_Rec, lambda = 0.0625 by default.
  L_CL is the symmetric InfoNCE (CLIP) loss between the two views' projections
  g(h_a), g(h_b) over the batch, with a learned temperature (logit scale, init 1/0.07,
  capped at 100). L_Rec is the latent modality reconstruction: from each view's h, a
  decoder per modality predicts that modality's normalized features, scored by MSE over
  every modality present at the location (also those outside the view), averaged over the
  two views. Missing modalities enter neither term.

Design choices (the paper leaves them open or they are scaled down): the views are a
random split of the present modalities — each goes to one view, or to both with
probability `view_overlap` — and a view left empty takes one random present modality from the
other (a location with a single modality shows it in both);
coordinates are a modality like the others in the views, but they are not reconstructed
(their features are the input itself); widths are small (D = 64, two layers) for the CPU.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from paperworks.services.urban.urbanfusion.location import DEFAULT_SCALES, LocationEncoder
from torch import nn

COORDINATES = "coordinates"  # the coordinates' modality name: token 0, present at every location
DEFAULT_RECONSTRUCTION_WEIGHT = 0.0625


@dataclass(frozen=True)
class FusionConfig:
    modalities: tuple[tuple[str, int], ...]  # (name, feature width) of each non-coordinate modality
    dim: int = 64
    layers: int = 2
    heads: int = 4
    location_scales: tuple[float, ...] = DEFAULT_SCALES
    seed: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        return (COORDINATES, *(name for name, _ in self.modalities))


def full_precision(device: torch.device | str):
    """Float32 inside a caller's mixed-precision (autocast) region, for the few steps that need it
    (the contrastive logits: a temperature up to 100 times a bf16 cosine is off by ~0.4)."""
    kind = torch.device(device).type
    if not torch.amp.is_autocast_available(kind):  # e.g. the meta device: nothing to leave
        return contextlib.nullcontext()
    return torch.autocast(kind, enabled=False)


def _mlp(inp: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.GELU(), nn.Linear(hidden, out))


class FusionBlock(nn.Module):
    """A pre-LayerNorm Transformer encoder block whose attention skips masked (absent) tokens.

    Written out rather than `nn.TransformerEncoderLayer`: with at most a handful of tokens per
    location, the explicit (B, H, M, M) attention is several times faster on the CPU.
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ff = _mlp(dim, 2 * dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, m, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, m, 3, self.heads, d // self.heads).unbind(2)
        scores = torch.einsum("bqhc,bkhc->bhqk", q, k) / (d // self.heads) ** 0.5
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        attended = torch.einsum("bhqk,bkhc->bqhc", scores.softmax(dim=-1), v).reshape(b, m, d)
        x = x + self.out(attended)
        return x + self.ff(self.norm2(x))


class UrbanFusion(nn.Module):
    def __init__(self, config: FusionConfig):
        super().__init__()
        torch.manual_seed(config.seed)
        self.config = config
        d = config.dim
        self.location = LocationEncoder(d, config.location_scales, seed=config.seed)
        self.projections = nn.ModuleDict({name: nn.Linear(width, d) for name, width in config.modalities})
        self.modality_embedding = nn.Parameter(0.02 * torch.randn(len(config.names), d))
        self.fusion = nn.ModuleList(FusionBlock(d, config.heads) for _ in range(config.layers))
        self.norm = nn.LayerNorm(d)
        self.contrastive_head = _mlp(d, d, d)
        self.decoders = nn.ModuleDict({name: _mlp(d, 2 * d, width) for name, width in config.modalities})
        self.logit_scale = nn.Parameter(torch.tensor(1 / 0.07).log())

    def tokens(self, xyz: torch.Tensor, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, M, D): one token per modality in `config.names` order (absent ones are masked later)."""
        parts = [self.location(xyz)]
        parts += [self.projections[name](features[name]) for name, _ in self.config.modalities]
        return torch.stack(parts, dim=1) + self.modality_embedding

    def fuse(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, D) embedding from the tokens where `mask` (B, M) is True; every row needs one."""
        out = tokens
        for block in self.fusion:
            out = block(out, mask)
        weights = mask.unsqueeze(-1).to(out.dtype)
        pooled = (out * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return self.norm(pooled)

    def forward(self, xyz: torch.Tensor, features: dict[str, torch.Tensor], mask: torch.Tensor):
        return self.fuse(self.tokens(xyz, features), mask)


def sample_views(present: torch.Tensor, overlap: float,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Two random non-empty subsets of each row's present modalities (see the module docstring)."""
    shape = present.shape
    both = torch.rand(shape, generator=generator) < overlap
    side = torch.rand(shape, generator=generator) < 0.5
    views = [present & (both | side), present & (both | ~side)]
    several = present.sum(dim=1) >= 2
    for view, other in ((views[0], views[1]), (views[1], views[0])):
        empty = ~view.any(dim=1)
        if empty.any():
            pick = torch.rand(shape, generator=generator).masked_fill(~present, -1.0).argmax(dim=1)
            rows = empty.nonzero().squeeze(1)
            view[rows, pick[rows]] = True
            moved = rows[several[rows]]  # the other view held all >= 2 present: one can move
            other[moved, pick[moved]] = False
    return views[0], views[1]


def contrastive_loss(z_a: torch.Tensor, z_b: torch.Tensor, logit_scale: torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE between L2-normalized projections; positives on the diagonal. Float32 even
    under autocast."""
    with full_precision(z_a.device):
        z_a, z_b = F.normalize(z_a.float(), dim=-1), F.normalize(z_b.float(), dim=-1)
        logits = logit_scale.float().exp().clamp(max=100.0) * z_a @ z_b.T
        labels = torch.arange(len(z_a), device=z_a.device)
        return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))


def reconstruction_loss(model: UrbanFusion, h: torch.Tensor, features: dict[str, torch.Tensor],
                        present: torch.Tensor) -> torch.Tensor:
    """Squared L2 error of every present non-coordinate modality's normalized feature vector,
    decoded from h, averaged over the (location, modality) pairs present."""
    total, count = h.new_zeros(()), present[:, 1:].sum().clamp(min=1)
    for j, (name, _) in enumerate(model.config.modalities, start=1):
        error = (model.decoders[name](h) - features[name]).pow(2).sum(dim=-1)
        total = total + (error * present[:, j]).sum()
    return total / count


def urbanfusion_loss(model: UrbanFusion, xyz: torch.Tensor, features: dict[str, torch.Tensor],
                     present: torch.Tensor, reconstruction_weight: float, view_overlap: float,
                     generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens = model.tokens(xyz, features)
    # the views are drawn on the CPU (the seeded generator's device), then moved to the model's
    mask_a, mask_b = (m.to(present.device) for m in sample_views(present.cpu(), view_overlap, generator))
    # Both views in one pass: (2B, M, D) tokens, the second half under the second view's mask.
    h = model.fuse(torch.cat([tokens, tokens]), torch.cat([mask_a, mask_b]))
    z_a, z_b = model.contrastive_head(h).chunk(2)
    cl = contrastive_loss(z_a, z_b, model.logit_scale)
    rec = h.new_zeros(())
    if reconstruction_weight > 0:
        both = {k: torch.cat([v, v]) for k, v in features.items()}
        rec = reconstruction_loss(model, h, both, torch.cat([present, present]))
    lam = reconstruction_weight
    return {"loss": (1 - lam) * cl + lam * rec, "contrastive": cl.detach(), "reconstruction": rec.detach()}
