"""The quantization pipelines: a method's initialization per layer, then QAT against the
full-precision teacher, then the packed (kernel-library) form of the result.

Methods: "rabit" (coupled residual binary paths, `rabit.py`), "lcqat" (linear-constrained VQ,
`lcqat.py`), and the baselines "independent" (two binary paths with their own latents),
"scalar_qat" and "rtn" (`scalar.py`). Embeddings and the output head stay in full precision.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from . import diagnostics, lcqat, rabit, scalar
from .common import (
    TokenData,
    find_linears,
    get_module,
    layer_inputs,
    linear_weight,
    set_module,
    train_student,
)

METHODS = ("rabit", "lcqat", "independent", "scalar_qat", "rtn")
Progress = Callable[[int, int, str, str], None]


def _quiet(*_a) -> None:
    return None


@dataclass
class QuantConfig:
    method: str = "rabit"
    steps: int = 100
    batch: int = 8
    seq_len: int = 64
    lr: float = 3e-4
    hidden_weight: float = 1.0
    calib_windows: int = 16
    init: str = "svid"  # RaBiT: "svid" (function-aware) or "greedy"
    init_sweeps: int = 50  # RaBiT: most Gauss-Seidel sweeps (they stop at the fixed point)
    block_steps: int = 30  # LC-QAT block reconstruction steps per block
    block_latent_lr: float = 0.0  # LC-QAT: > 0 also trains the code latents in block reconstruction
    e2e_steps: int = 0  # LC-QAT: end-to-end steps on the calibration windows after block reconstruction
    e2e_latent_lr: float = 0.0  # LC-QAT: > 0 also trains the code latents in those steps
    group_size: int = 64  # scalar baselines
    seed: int = 0

    @property
    def tokens(self) -> int:
        return (0 if self.method == "rtn" else self.steps) * self.batch * self.seq_len


def _frozen_copy(teacher: nn.Module) -> nn.Module:
    student = copy.deepcopy(teacher).float()
    for p in student.parameters():
        p.requires_grad_(False)
    return student


def _layer(method: str, w, bias, x, i: int, cfg: QuantConfig) -> nn.Module:
    if method in ("rabit", "independent"):
        return rabit.make_layer(w, bias, x, coupled=method == "rabit", init=cfg.init, sweeps=cfg.init_sweeps)
    if method == "lcqat":
        layer = lcqat.LCLinear(w, bias, cfg.seed * 1000 + 2 * i)
        layer.ptq(x)
        return layer
    if method in ("scalar_qat", "rtn"):
        return scalar.ScalarQATLinear(w, bias, cfg.group_size)
    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def build_student(teacher: nn.Module, data: TokenData, cfg: QuantConfig,
                  progress: Progress = _quiet) -> tuple[nn.Module, dict]:
    """The step-0 quantized student: the method's initialization (PTQ for LC-QAT)."""
    names = find_linears(teacher)
    calib = data.calib(cfg.seq_len, cfg.calib_windows, cfg.seed)
    inputs = layer_inputs(teacher, names, calib)
    student = _frozen_copy(teacher)
    info: dict = {"layers": len(names)}
    for i, name in enumerate(names):
        w, bias = linear_weight(get_module(teacher, name))
        set_module(student, name, _layer(cfg.method, w, bias, inputs[name], i, cfg))
        progress(i + 1, len(names), "init", f"{name} {tuple(w.shape)}")
    if cfg.method == "lcqat" and cfg.block_steps > 0:
        info["block_reconstruction_error"] = lcqat.block_reconstruction(
            student, teacher, calib, steps=cfg.block_steps, latent_lr=cfg.block_latent_lr,
            on_block=lambda i, n, e: progress(i, n, "block_reconstruction", f"block {i}: rel. MSE {e:.4f}"),
        )
    if cfg.method == "lcqat" and cfg.e2e_steps > 0:
        info["end_to_end_losses"] = lcqat.end_to_end(
            student, teacher, calib, steps=cfg.e2e_steps, latent_lr=cfg.e2e_latent_lr,
            hidden_weight=cfg.hidden_weight,
            on_step=lambda i, n, loss: progress(i, n, "end_to_end", f"step {i}: loss {loss:.4f}"))
    return student.eval(), info


def trainable(student: nn.Module) -> list[nn.Parameter]:
    """The QAT parameters of every quantized layer (switching LC-QAT layers to their latents)."""
    params = []
    for m in student.modules():
        if isinstance(m, rabit.RaBiTLinear):
            params += [m.weight, m.g, m.h]
        elif isinstance(m, rabit.IndependentBinaryLinear):
            params += [m.latent, m.g, m.h]
        elif isinstance(m, lcqat.LCLinear):
            if m.mode != "qat":
                m.start_qat()
            params += [m.latent, m.a, m.b, m.scale, m.in_scale]
        elif isinstance(m, scalar.ScalarQATLinear):
            params += [m.weight, m.log_gain, m.offset]
    for p in params:
        p.requires_grad_(True)
    return params


def train(student: nn.Module, teacher: nn.Module, data: TokenData, cfg: QuantConfig,
          progress: Progress = _quiet) -> list[float]:
    """QAT for `cfg.steps` steps (RTN never trains); LC-QAT latents are rounded into codes after."""
    steps = 0 if cfg.method == "rtn" else cfg.steps
    losses: list[float] = []
    if steps:
        params = trainable(student)

        def on_step(step, parts):
            progress(step, steps, "training", f"loss {parts['loss']:.4f} (KL {parts['kl']:.4f}, "
                                              f"hidden MSE {parts['hidden_mse']:.4f})")

        losses = train_student(student, teacher, data, steps=steps, batch=cfg.batch, seq_len=cfg.seq_len,
                               lr=cfg.lr, hidden_weight=cfg.hidden_weight, seed=cfg.seed + 1,
                               param_groups=[{"params": params}], on_step=on_step)
    for m in student.modules():
        if isinstance(m, lcqat.LCLinear) and m.mode == "qat":
            m.finish_qat()
    for p in student.parameters():
        p.requires_grad_(False)
    return losses


def quantize(teacher: nn.Module, data: TokenData, cfg: QuantConfig,
             progress: Progress = _quiet) -> tuple[nn.Module, dict]:
    """Initialization + QAT; returns the (fake-quantized) student and what happened."""
    student, info = build_student(teacher, data, cfg, progress)
    info["losses"] = train(student, teacher, data, cfg, progress)
    info["tokens"] = cfg.tokens
    return student.eval(), info


def pack(student: nn.Module) -> nn.Module:
    """The same model with every quantized layer replaced by its packed-kernel form."""
    packed = copy.deepcopy(student)
    for name, m in list(packed.named_modules()):
        if isinstance(m, rabit.TwoPathLinear):
            set_module(packed, name, rabit.PackedBinaryLinear.from_layer(m))
        elif isinstance(m, lcqat.LCLinear | scalar.ScalarQATLinear):
            set_module(packed, name, m.packed())
    return packed.eval()


@torch.no_grad()
def layer_report(model: nn.Module, teacher: nn.Module, ids: torch.Tensor,
                 on_layer: Callable[[int, int, str], None] | None = None) -> dict[str, dict]:
    """`diagnostics.layer_diagnostics` of every quantized layer on the teacher's activations."""
    names = find_linears(teacher)
    inputs = layer_inputs(teacher, names, ids)
    out = {}
    for i, n in enumerate(names):
        w = linear_weight(get_module(teacher, n))[0]
        out[n] = diagnostics.layer_diagnostics(get_module(model, n), w, inputs[n])
        if on_layer:
            on_layer(i + 1, len(names), n)
    return out
