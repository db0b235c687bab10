"""LC-QAT: 2-bit weight-only vector QAT through a linear-constrained codebook
(ICML 2026, arXiv 2606.10531). Its scalar 2-bit baselines live in `scalar.py`.

*Incoherence processing* (Sec. 3.1): with random-sign block Hadamards U = H D_out, V = H D_in
(orthogonal) and a learned per-input-channel scale c, a linear y = W x runs as

    y = U^T (s * Q(W~) (V (x / c))),   W~ = U W diag(c) V^T / s   (s: learned per-row scale),

so the quantized matrix Q(W~) sees incoherent, near-Gaussian weights.

*Linear-constrained codebook* (Sec. 3.2, Eq. 3): the 256 codewords of a 4-D vector are an
affine image of the 2-bit integer grid, c(z) = A z + b with z in {0..3}^4, A (4x4) and b (4)
per weight matrix, so a code is the 8-bit index of z (2 bits per weight).

*PTQ initialization* (Sec. 3.3): Hessian-aware sequential rounding - GPTQ over 4-column blocks
with H = E[x~ x~^T] from calibration data, in act-order (the blocks with the largest diag(H)
first): each block is rounded to its nearest codeword and the error, scaled by the
inverse-Hessian Cholesky factor, is pushed onto the blocks not yet rounded; A and b are then
refitted to the chosen z by least squares weighted by the Hessian (and the squared row scales),
i.e. to minimise the layer's output error on the calibration inputs (two rounds). Then *block
reconstruction fine-tuning*: per transformer block, the continuous parameters (A, b, s, c) are
fitted so that the block's output on the full-precision block input matches the full-precision
block; optionally (`latent_lr` > 0) the code latents train with them, through QAT's rounding
and surrogate (below), and are rounded back into codes. Optionally (`end_to_end`, our
extension) the whole model then fits the QAT objective on the same calibration windows (all
layers' A, b, s, c and code latents).

*QAT* (Sec. 3.4): a continuous latent V in z-space, z = clamp(round(V), 0, 3) rounded per
coordinate (no nearest-codeword search, no lookup in the forward), W~ = A z + b, and the DGE
surrogate gradient for round: d round(v)/dv ~ (1/k) |2 (v - floor(v) - 1/2)|^(1/k - 1), capped
at `DGE_MAX` (k = `DGE_K`). V starts at the PTQ z exactly, so the step-0 QAT model is the
PTQ model (the PTQ layer computes through the codebook lookup, the QAT layer through
per-coordinate rounding; the tests check they agree).

*Inference* (Sec. 3.5): A and b fold into the activations, (A z + b) . x_q = z . (A^T x_q) +
b . x_q, leaving a plain 2-bit integer matvec: `ops.lattice_linear`.

Design choices: Hadamard blocks are the largest power of two dividing the width (<= 256);
1% diagonal damping; block fine-tuning uses Adam for `block_steps` steps per block, on the
calibration windows 16 at a time, and may train the code latents too (our choice; the paper's
block reconstruction fits the continuous parameters with the codes fixed); DGE k = 4.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from paperworks.kernels import ops, packing
from torch import nn

from .common import distill_loss, forward, is_linear

DGE_K, DGE_MAX = 4.0, 3.0
GRID = torch.stack([(torch.arange(256) >> (2 * j)) & 3 for j in range(4)], -1).float()  # (256, 4)


def hadamard(n: int) -> torch.Tensor:
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(n)


def block_size(dim: int) -> int:
    return min(dim & -dim, 256)


class Rotation(nn.Module):
    """x -> blockdiag(H) (d * x), orthogonal; `inverse` applies the transpose."""

    def __init__(self, dim: int, seed: int):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("signs", (torch.randint(0, 2, (dim,), generator=gen) * 2 - 1).float())
        self.register_buffer("h", hadamard(block_size(dim)))

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
        self.rot_in, self.rot_out = Rotation(m, seed), Rotation(n, seed + 1)
        self.in_scale = nn.Parameter(torch.ones(m))
        wt = self.rot_out(self.rot_in(w).T).T  # U W V^T
        self.scale = nn.Parameter(wt.pow(2).mean(1).sqrt().clamp_min(1e-8))
        alpha = 0.996  # the MSE-optimal uniform 4-level step for a unit Gaussian
        self.a = nn.Parameter(torch.eye(4) * alpha)
        self.b = nn.Parameter(torch.full((4,), -1.5 * alpha))
        self.register_buffer("target", wt / self.scale.detach()[:, None])  # normalised W~ (for PTQ)
        self.register_buffer("codes", torch.zeros(n, m // 4, dtype=torch.uint8))
        self.register_buffer("bias", None if bias is None else bias.float())
        self.latent: nn.Parameter | None = None
        self.mode = "ptq"

    def z(self) -> torch.Tensor:
        """(N, M/4, 4) integer grid points of the current codes."""
        return GRID[self.codes.long()]

    def normalised_weight(self) -> torch.Tensor:
        if self.mode == "qat":
            z = dge_round(self.latent).clamp(0, 3)
            return (z @ self.a.T + self.b).reshape(self.n, self.m)
        codebook = GRID @ self.a.T + self.b  # the (256, 4) codebook, looked up by code
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
        hess += damp * hess.diag().mean() * torch.eye(self.m)
        nb = self.m // 4
        order = torch.arange(nb)
        if act_order:  # GPTQ's act-order: the 4-blocks with the largest Hessian diagonal first
            order = hess.diag().reshape(nb, 4).sum(1).argsort(descending=True)
        cols = (4 * order[:, None] + torch.arange(4)).reshape(-1)
        hp = hess[cols][:, cols]
        hinv = torch.cholesky_inverse(torch.linalg.cholesky(hp.double()))
        u = torch.linalg.cholesky(hinv, upper=True).float()
        for _ in range(rounds):
            codebook = GRID @ self.a.T + self.b
            w = self.target[:, cols].clone()
            codes = torch.empty(self.n, nb, dtype=torch.long)
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
        zz = torch.cat([self.z(), torch.ones(self.n, nb, 1)], -1).double()  # (N, M/4, 5): [z, 1]
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
        self.rot_in, self.rot_out = Rotation(m, 0), Rotation(n, 0)
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


# ---- block reconstruction fine-tuning ----
def lc_layers(module: nn.Module) -> list[LCLinear]:
    return [m for m in module.modules() if isinstance(m, LCLinear)]


def find_blocks(module: nn.Module) -> nn.ModuleList:
    for _, m in module.named_modules():
        if isinstance(m, nn.ModuleList) and len(m) and any(is_linear(c) or isinstance(c, LCLinear)
                                                           for c in m[0].modules()):
            return m
    raise ValueError("no list of transformer blocks found")


def _first(out):
    return out[0] if isinstance(out, tuple | list) else out


def _optimizer(layers: list[LCLinear], lr: float, latent_lr: float) -> torch.optim.Adam:
    """Adam over the layers' continuous parameters (A, b, s, c) at `lr` and, where `latent_lr` > 0,
    their code latents (switched to QAT's rounding and surrogate) at `latent_lr`."""
    groups = [{"params": [p for m in layers for p in (m.a, m.b, m.scale, m.in_scale)], "lr": lr}]
    if latent_lr > 0:
        for m in layers:
            m.start_qat()
        groups.append({"params": [m.latent for m in layers], "lr": latent_lr})
    for group in groups:
        for p in group["params"]:
            p.requires_grad_(True)
    return torch.optim.Adam(groups)


def _round_back(layers: list[LCLinear]) -> None:
    """Latents back into codes, so the next stage (or QAT's step 0) starts exactly here."""
    for m in layers:
        if m.mode == "qat":
            m.finish_qat()


def block_reconstruction(student: nn.Module, teacher: nn.Module, ids: torch.Tensor, *, steps: int,
                         lr: float = 1e-3, latent_lr: float = 0.0, batch: int = 16,
                         on_block=None) -> list[float]:
    """Fits each block's LC parameters to the teacher block's output on the teacher block's input
    (Adam, `steps` steps per block, cycling over the calibration windows `batch` at a time);
    returns the final relative MSE per block over all the windows.

    With `latent_lr` = 0 the codes stay fixed and only the continuous parameters (A, b, s, c)
    train. With `latent_lr` > 0 the block's code latents train too (at that lr), through the same
    per-coordinate rounding and DGE surrogate as QAT, started at the rounded codes; they are
    rounded back into codes at the end of the block (so the QAT start is still exactly this model).
    """
    t_blocks, s_blocks = find_blocks(teacher), find_blocks(student)
    chunks = []  # per chunk of windows: per block (args, kwargs, output) of the teacher
    hooks = [b.register_forward_hook(lambda m, a, k, o: chunks[-1].append((a, k, _first(o).detach())),
                                     with_kwargs=True) for b in t_blocks]
    try:
        with torch.no_grad():
            for c0 in range(0, len(ids), batch):
                chunks.append([])
                forward(teacher, ids[c0 : c0 + batch])
    finally:
        for h in hooks:
            h.remove()

    def rel_mse(blk, i, chunk):
        args, kwargs, target = chunk[i]
        return (_first(blk(*args, **kwargs)) - target).pow(2).mean() / target.pow(2).mean().clamp_min(1e-12)

    result = []
    for i, blk in enumerate(s_blocks):
        layers = lc_layers(blk)
        opt = _optimizer(layers, lr, latent_lr)
        for step in range(steps):
            loss = rel_mse(blk, i, chunks[step % len(chunks)])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        _round_back(layers)
        with torch.no_grad():
            errors = [float(rel_mse(blk, i, chunk)) for chunk in chunks]
        result.append(sum(errors) / len(errors))
        if on_block:
            on_block(i + 1, len(s_blocks), result[-1])
    return result


def end_to_end(student: nn.Module, teacher: nn.Module, ids: torch.Tensor, *, steps: int, lr: float = 1e-3,
               latent_lr: float = 0.0, batch: int = 16, hidden_weight: float = 1.0,
               on_step=None) -> list[float]:
    """End-to-end fine-tuning on the calibration windows (cycled `batch` at a time, Adam at a constant
    lr): the QAT objective (KL to the teacher + hidden-state MSE) over every layer's A, b, s, c and,
    where `latent_lr` > 0, the code latents (QAT's rounding and DGE surrogate), rounded back into
    codes at the end (so the QAT start is still exactly this model). Returns the per-step losses;
    `on_step(step, steps, loss)` hears each one."""
    layers = lc_layers(student)
    opt = _optimizer(layers, lr, latent_lr)
    losses = []
    for step in range(steps):
        c0 = (step * batch) % len(ids)
        loss, _, _ = distill_loss(student, teacher, ids[c0 : c0 + batch], hidden_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if on_step:
            on_step(step + 1, steps, losses[-1])
    _round_back(layers)
    return losses
