"""RaBiT's layers: the function-aware init, the coupled two-path layer (and the independent-latent
baseline), and the packed inference form. The method is described in the package docstring."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from paperworks.kernels import ops, packing
from torch import nn


def sign(w: torch.Tensor) -> torch.Tensor:
    """+-1 with sign(0) = +1, the kernel library's convention."""
    return torch.where(w >= 0, 1.0, -1.0).to(w.dtype)


def ste_sign(w: torch.Tensor) -> torch.Tensor:
    """sign(w) forward, identity backward (the straight-through estimator)."""
    return w + (sign(w) - w).detach()


def rank1(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Best rank-1 g h^T of m (SVD), signs chosen so that g sums positive."""
    u, s, vh = torch.linalg.svd(m.double(), full_matrices=False)
    g, h = u[:, 0] * s[0].sqrt(), vh[0] * s[0].sqrt()
    if g.sum() < 0:
        g, h = -g, -h
    return g.float(), h.float()


def channel_importance(x: torch.Tensor | None, m: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """s_j = sqrt(E[x_j^2]) over calibration tokens, normalised to mean 1 (ones without data)."""
    if x is None:
        return torch.ones(m, device=device)
    s = x.float().pow(2).mean(0).sqrt().clamp_min(1e-6)
    return s / s.mean()


def svid_init(w: torch.Tensor, x: torch.Tensor | None, sweeps: int = 50,
              tol: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    """(g (2, N), h (2, M)) of the coupled paths of w, preconditioned by activations x (T, M).

    Gauss-Seidel sweeps until the fixed point: B_2 unchanged and the two-path fit moved by at
    most `tol` (relative), or `sweeps` sweeps."""
    s = channel_importance(x, w.shape[1], w.device)
    wt = w * s
    b1 = sign(w)
    p2 = torch.zeros_like(wt)
    b2 = fit = None
    for _ in range(max(sweeps, 1)):
        g1, h1 = rank1(b1 * (wt - p2))
        r1 = wt - g1[:, None] * b1 * h1
        b2, b2_before = sign(r1), b2
        g2, h2 = rank1(b2 * r1)
        p2 = g2[:, None] * b2 * h2
        fit, fit_before = wt - r1 + p2, fit
        settled = fit_before is not None and torch.equal(b2, b2_before)
        if settled and (fit - fit_before).norm() <= tol * fit.norm():
            break
    return torch.stack([g1, g2]), torch.stack([h1 / s, h2 / s])


def greedy_init(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(g, h) of plain greedy residual binarization (g = mean |residual| per row, h = 1)."""
    _, alpha = packing.binarize_residual(w, 2)
    return alpha.to(w.device), torch.ones(2, w.shape[1], device=w.device)


class TwoPathLinear(nn.Module):
    """A linear whose weight is two binary paths diag(g_i) B_i diag(h_i); subclasses say
    where the signs B_i come from."""

    def __init__(self, g: torch.Tensor, h: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.g, self.h = nn.Parameter(g.clone()), nn.Parameter(h.clone())
        self.register_buffer("bias", None if bias is None else bias.clone())

    def paths(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The two path weights, differentiable (STE through the signs)."""
        raise NotImplementedError

    def signs(self) -> torch.Tensor:
        """(2, N, M) float +-1 of the two paths."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p1, p2 = self.paths()
        return F.linear(x, (p1 + p2).to(x.dtype), self.bias)

    @torch.no_grad()
    def path_weights(self) -> tuple[torch.Tensor, ...]:
        return tuple(p.detach() for p in self.paths())


class RaBiTLinear(TwoPathLinear):
    """Coupled residual paths from one latent W (Sec. 3.2)."""

    def __init__(self, w: torch.Tensor, bias: torch.Tensor | None, g: torch.Tensor, h: torch.Tensor):
        super().__init__(g, h, bias)
        self.weight = nn.Parameter(w.clone())

    def paths(self):
        p1 = self.g[0][:, None] * ste_sign(self.weight) * self.h[0]
        return p1, self.g[1][:, None] * ste_sign(self.weight - p1) * self.h[1]

    @torch.no_grad()
    def signs(self):
        p1 = self.g[0][:, None] * sign(self.weight) * self.h[0]
        return torch.stack([sign(self.weight), sign(self.weight - p1)])


class IndependentBinaryLinear(TwoPathLinear):
    """Baseline: two binary paths, each with its own latent (co-adaptation is possible)."""

    def __init__(self, latents: torch.Tensor, bias, g, h):
        super().__init__(g, h, bias)
        self.latent = nn.Parameter(latents.clone())

    def paths(self):
        return tuple(self.g[i][:, None] * ste_sign(self.latent[i]) * self.h[i] for i in range(2))

    @torch.no_grad()
    def signs(self):
        return sign(self.latent)


def make_layer(w: torch.Tensor, bias, x: torch.Tensor | None, *, coupled: bool = True,
               init: str = "svid", sweeps: int = 50) -> TwoPathLinear:
    """A RaBiT (coupled) or independent-latent two-path layer, both at the same step-0 weights."""
    g, h = svid_init(w, x, sweeps) if init == "svid" else greedy_init(w)
    layer = RaBiTLinear(w, bias, g, h)
    if coupled:
        return layer
    p1, _ = layer.path_weights()
    return IndependentBinaryLinear(torch.stack([w, w - p1]), bias, g, h)


class PackedBinaryLinear(nn.Module):
    """Inference: packed sign bits (2, N, ceil(M/8)) + g (2, N), h (2, M) on `ops.binary_linear`."""

    def __init__(self, signs: torch.Tensor, g: torch.Tensor, h: torch.Tensor, bias, in_features: int):
        super().__init__()
        self.register_buffer("signs", signs.contiguous())
        self.register_buffer("g", g.float().contiguous())
        self.register_buffer("h", h.float().contiguous())
        self.register_buffer("bias", None if bias is None else bias.float())
        self.in_features = in_features

    @classmethod
    def from_layer(cls, layer: TwoPathLinear) -> PackedBinaryLinear:
        bias = None if layer.bias is None else layer.bias.detach()
        return cls(packing.pack_signs(layer.signs()), layer.g.detach(), layer.h.detach(), bias,
                   layer.h.shape[1])

    @classmethod
    def from_tensors(cls, t: dict[str, torch.Tensor]) -> PackedBinaryLinear:
        return cls(t["signs"], t["g"], t["h"], t.get("bias"), t["h"].shape[1])

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {"signs": self.signs, "g": self.g, "h": self.h}
        return out if self.bias is None else {**out, "bias": self.bias}

    def path_weights(self) -> tuple[torch.Tensor, ...]:
        """The dequantized (N, M) weight of each path, for diagnostics."""
        b = packing.unpack_signs(self.signs, self.in_features)
        return tuple(self.g[i][:, None] * b[i] * self.h[i] for i in range(b.shape[0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = sum(ops.binary_linear(x * self.h[i].to(x.dtype), self.signs[i : i + 1], self.g[i : i + 1])
                for i in range(self.signs.shape[0]))
        return y if self.bias is None else y + self.bias.to(y.dtype)
