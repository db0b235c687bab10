"""LC-QAT's layers: the incoherence rotation, the DGE rounding, the layer with its Hessian-aware
PTQ and QAT modes, and the packed inference form. The method is described in the package
docstring."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from paperworks.kernels import ops, packing
from torch import nn

DGE_K, DGE_MAX = 4.0, 3.0
GRID = torch.stack([(torch.arange(256) >> (2 * j)) & 3 for j in range(4)], -1).float()  # (256, 4)


def grid(device: torch.device | str) -> torch.Tensor:
    """`GRID` on `device`."""
    return GRID.to(device)


def hadamard(n: int) -> torch.Tensor:
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(n)


def block_size(dim: int) -> int:
    return min(dim & -dim, 256)


class Rotation(nn.Module):
    """x -> blockdiag(H) (d * x), orthogonal; `inverse` applies the transpose."""

    def __init__(self, dim: int, seed: int, device: torch.device | str = "cpu"):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)  # the signs are drawn on the CPU, for every device
        signs = (torch.randint(0, 2, (dim,), generator=gen) * 2 - 1).float()
        self.register_buffer("signs", signs.to(device))
        self.register_buffer("h", hadamard(block_size(dim)).to(device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.h.shape[0]
        return ((x * self.signs).reshape(*x.shape[:-1], -1, b) @ self.h.T).reshape(x.shape)

    def inverse(self, x: torch.Tensor) -> torch.Tensor:
        b = self.h.shape[0]
        return (x.reshape(*x.shape[:-1], -1, b) @ self.h).reshape(x.shape) * self.signs


class _DGERound(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return torch.round(v)

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        d = (2 * (v - torch.floor(v) - 0.5)).abs().clamp_min(1e-6)
        return grad * ((1 / DGE_K) * d.pow(1 / DGE_K - 1)).clamp_max(DGE_MAX)


def dge_round(v: torch.Tensor) -> torch.Tensor:
    return _DGERound.apply(v)


class LCLinear(nn.Module):
    """One LC-QAT layer. mode "ptq": W~ = codebook(A, b)[codes]; mode "qat": W~ = A round(V) + b."""

    def __init__(self, w: torch.Tensor, bias, seed: int):
        super().__init__()
        n, m = w.shape
        if m % 4:
            raise ValueError(f"LC-QAT needs in_features divisible by 4, got {m}")
        self.n, self.m = n, m
        dev = w.device
        self.rot_in, self.rot_out = Rotation(m, seed, dev), Rotation(n, seed + 1, dev)
        self.in_scale = nn.Parameter(torch.ones(m, device=dev))
        wt = self.rot_out(self.rot_in(w).T).T  # U W V^T
        self.scale = nn.Parameter(wt.pow(2).mean(1).sqrt().clamp_min(1e-8))
        alpha = 0.996  # the MSE-optimal uniform 4-level step for a unit Gaussian
        self.a = nn.Parameter(torch.eye(4, device=dev) * alpha)
        self.b = nn.Parameter(torch.full((4,), -1.5 * alpha, device=dev))
        self.register_buffer("target", wt / self.scale.detach()[:, None])  # normalised W~ (for PTQ)
        self.register_buffer("codes", torch.zeros(n, m // 4, dtype=torch.uint8, device=dev))
        self.register_buffer("bias", None if bias is None else bias.float())
        self.latent: nn.Parameter | None = None
        self.mode = "ptq"

    def z(self) -> torch.Tensor:
        """(N, M/4, 4) integer grid points of the current codes."""
        return grid(self.codes.device)[self.codes.long()]

    def normalised_weight(self) -> torch.Tensor:
        if self.mode == "qat":
            z = dge_round(self.latent).clamp(0, 3)
            return (z @ self.a.T + self.b).reshape(self.n, self.m)
        codebook = grid(self.a.device) @ self.a.T + self.b  # the (256, 4) codebook, looked up by code
        return codebook[self.codes.long()].reshape(self.n, self.m)

    def start_qat(self) -> None:
        self.latent = nn.Parameter(self.z().clone())
        self.mode = "qat"

    def finish_qat(self) -> None:
        with torch.no_grad():
            z = torch.round(self.latent).clamp(0, 3)
            self.codes = (z[..., 0] + 4 * z[..., 1] + 16 * z[..., 2] + 64 * z[..., 3]).to(torch.uint8)
        self.latent, self.mode = None, "ptq"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xt = self.rot_in(x / self.in_scale)
        y = F.linear(xt, self.normalised_weight()) * self.scale
        y = self.rot_out.inverse(y)
        return y if self.bias is None else y + self.bias

    # ---- PTQ: Hessian-aware sequential rounding ----
    @torch.no_grad()
    def ptq(self, x: torch.Tensor, rounds: int = 2, damp: float = 0.01, act_order: bool = True) -> None:
        xt = self.rot_in(x / self.in_scale)
        hess = xt.T @ xt / len(xt)
        dev = xt.device
        hess += damp * hess.diag().mean() * torch.eye(self.m, device=dev)
        nb = self.m // 4
        order = torch.arange(nb, device=dev)
        if act_order:  # GPTQ's act-order: the 4-blocks with the largest Hessian diagonal first
            order = hess.diag().reshape(nb, 4).sum(1).argsort(descending=True)
        cols = (4 * order[:, None] + torch.arange(4, device=dev)).reshape(-1)
        hp = hess[cols][:, cols]
        hinv = torch.cholesky_inverse(torch.linalg.cholesky(hp.double()))
        u = torch.linalg.cholesky(hinv, upper=True).float()
        for _ in range(rounds):
            codebook = grid(dev) @ self.a.T + self.b
            w = self.target[:, cols].clone()
            codes = torch.empty(self.n, nb, dtype=torch.long, device=dev)
            for blk in range(nb):
                c0, c1 = 4 * blk, 4 * blk + 4
                code = torch.cdist(w[:, c0:c1], codebook).argmin(1)
                codes[:, order[blk]] = code
                # OBS update of the columns not yet rounded for a jointly rounded 4-block:
                # dW_rest = -E (H^-1_BB)^-1 H^-1_B,rest = -E U_BB^-1 U_B,rest (H^-1 = U^T U)
                err = torch.linalg.solve_triangular(u[c0:c1, c0:c1], w[:, c0:c1] - codebook[code],
                                                    upper=True, left=False)
                w[:, c1:] -= err @ u[c0:c1, c1:]
            self.codes = codes.to(torch.uint8)
            self.refit_codebook(hess)

    @torch.no_grad()
    def refit_codebook(self, hess: torch.Tensor) -> None:
        """A, b minimising the layer's output error on the calibration inputs for the current codes,
        sum_r s_r^2 e_r H e_r^T with e = W~ - (A z + b): a 20-unknown weighted least squares."""
        nb = self.m // 4
        ones = torch.ones(self.n, nb, 1, device=self.codes.device)
        zz = torch.cat([self.z(), ones], -1).double()  # (N, M/4, 5): [z, 1]
        rows = self.scale.detach().double().pow(2)
        flat = zz.reshape(self.n, nb * 5)
        gram = ((flat * rows[:, None]).T @ flat).reshape(nb, 5, nb, 5)  # sum_r s_r^2 zz_rj zz_rk
        h4 = hess.double().reshape(nb, 4, nb, 4)
        lhs = torch.einsum("jqkQ,jpkP->pqPQ", gram, h4).reshape(20, 20)
        th = (self.target.double() @ hess.double()).reshape(self.n, nb, 4)
        rhs = torch.einsum("r,rjq,rjp->pq", rows, zz, th).reshape(20)
        # lstsq: a z coordinate that no code varies leaves the system singular
        theta = torch.linalg.lstsq(lhs, rhs[:, None], driver="gelsd").solution
        theta = theta.reshape(4, 5).float()  # row p: A[p, :], b[p]
        self.a.copy_(theta[:, :4])
        self.b.copy_(theta[:, 4])

    def packed(self) -> PackedLatticeLinear:
        return PackedLatticeLinear(self.codes_packed(), self.a.detach(), self.b.detach(),
                                   self.scale.detach(), self.in_scale.detach(), self.rot_in.signs,
                                   self.rot_out.signs, self.bias)

    def codes_packed(self) -> torch.Tensor:
        return packing.pack_int2(self.z().reshape(self.n, self.m).to(torch.uint8))


class PackedLatticeLinear(nn.Module):
    """Inference on `ops.lattice_linear`: 2-bit z codes with A, b folded into the activations."""

    def __init__(self, codes, a, b, scale, in_scale, in_signs, out_signs, bias):
        super().__init__()
        n, m = codes.shape[0], in_scale.shape[0]
        self.rot_in, self.rot_out = Rotation(m, 0, codes.device), Rotation(n, 0, codes.device)
        self.rot_in.signs.copy_(in_signs)
        self.rot_out.signs.copy_(out_signs)
        for name, t in (("codes", codes), ("a", a), ("b", b), ("scale", scale), ("in_scale", in_scale)):
            self.register_buffer(name, t.contiguous() if name == "codes" else t.float().contiguous())
        self.register_buffer("bias", None if bias is None else bias.float())

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {"codes": self.codes, "a": self.a, "b": self.b, "scale": self.scale,
               "in_scale": self.in_scale, "in_signs": (self.rot_in.signs > 0).to(torch.uint8),
               "out_signs": (self.rot_out.signs > 0).to(torch.uint8)}
        return out if self.bias is None else {**out, "bias": self.bias}

    @classmethod
    def from_tensors(cls, t: dict[str, torch.Tensor]) -> PackedLatticeLinear:
        return cls(t["codes"], t["a"], t["b"], t["scale"], t["in_scale"], t["in_signs"].float() * 2 - 1,
                   t["out_signs"].float() * 2 - 1, t.get("bias"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xt = self.rot_in(x.float() / self.in_scale)
        m = xt.shape[-1]
        y = ops.lattice_linear(xt, self.codes, self.a, self.b, self.scale[:, None], group_size=m)
        y = self.rot_out.inverse(y)
        return (y if self.bias is None else y + self.bias).to(x.dtype)
