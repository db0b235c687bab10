"""LC-QAT's fine-tuning stages after the PTQ rounding: block reconstruction per transformer block
(Sec. 3.3) and, optionally, an end-to-end fit on the same calibration windows (our extension).
Both may train the code latents through QAT's rounding and surrogate and round them back into
codes, so that QAT still starts exactly at the model they leave."""

from __future__ import annotations

import torch
from torch import nn

from ..distill import distill_loss
from ..linears import find_block_list, forward
from .layers import LCLinear


def lc_layers(module: nn.Module) -> list[LCLinear]:
    return [m for m in module.modules() if isinstance(m, LCLinear)]


def find_blocks(module: nn.Module) -> nn.ModuleList:
    found = find_block_list(module)
    if found is None:
        raise ValueError("no list of transformer blocks found")
    return found[1]


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
