"""The quantization pipeline: a method's initialization per layer, then QAT against the
full-precision teacher, then the packed (kernel-library) form of the result. What differs by
method comes from the registry in `methods.py`. Embeddings and the output head stay in full
precision. Everything runs on the device the caller names (the teacher, the student, every
calibration window and batch; the packed layers' kernels follow their tensors' device).
Calibration and initialization are float32 (Hessians, SVID sweeps and act-order rounding are
precision-sensitive); QAT's forward passes may run in mixed precision (`amp`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch import nn

from . import coverage, experts, methods
from .distill import TokenData, train_student
from .linears import find_linears, get_module, layer_inputs, linear_weight, set_module

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
    def qat_steps(self) -> int:
        """QAT steps actually run (none for a method that does not train, RTN)."""
        return self.steps if methods.get(self.method).trains else 0

    @property
    def tokens(self) -> int:
        return self.qat_steps * self.batch * self.seq_len


def _frozen_copy(teacher: nn.Module) -> nn.Module:
    student = copy.deepcopy(teacher).float()
    for p in student.parameters():
        p.requires_grad_(False)
    return student


def build_student(teacher: nn.Module, data: TokenData, cfg: QuantConfig,
                  progress: Progress = _quiet) -> tuple[nn.Module, dict]:
    """The step-0 quantized student: the method's initialization (PTQ for LC-QAT). A method that
    `splits_experts` first turns the student's fused MoE experts into one linear per expert (same
    function), so they are quantized too; an expert no calibration token reaches gets empty
    inputs (such a method does not read them). `info["coverage"]` is what will be quantized."""
    method = methods.get(cfg.method)
    student = _frozen_copy(teacher)
    info: dict = {"unfused_experts": experts.unfuse(student) if method.splits_experts else []}
    names = find_linears(student)
    calib = data.calib(cfg.seq_len, cfg.calib_windows, cfg.seed)
    inputs = layer_inputs(student, names, calib)  # still the teacher's float function
    info.update(layers=len(names), coverage=coverage.plan(student, names))
    progress(0, len(names), "init", coverage.describe(info["coverage"]))
    for i, name in enumerate(names):
        w, bias = linear_weight(get_module(student, name))
        x = inputs.get(name, w.new_zeros(0, w.shape[1]))
        set_module(student, name, method.layer(w, bias, x, i, cfg))
        progress(i + 1, len(names), "init", f"{name} {tuple(w.shape)}")
    info.update(method.refine(student, teacher, calib, cfg, progress))
    return student.eval(), info


def trainable(student: nn.Module) -> list[nn.Parameter]:
    """The QAT parameters of every quantized layer (switching LC-QAT layers to their latents)."""
    params = []
    for m in student.modules():
        method = methods.of_layer(m)
        if method is not None:
            params += method.qat_params(m)
    for p in params:
        p.requires_grad_(True)
    return params


def train(student: nn.Module, teacher: nn.Module, data: TokenData, cfg: QuantConfig,
          progress: Progress = _quiet,
          amp: Callable[[], AbstractContextManager] = contextlib.nullcontext) -> list[float]:
    """QAT for `cfg.steps` steps (RTN never trains), forward passes inside `amp()`; LC-QAT latents
    are rounded into codes after."""
    steps = cfg.qat_steps
    losses: list[float] = []
    if steps:
        params = trainable(student)

        def on_step(step, parts):
            progress(step, steps, "training", f"loss {parts['loss']:.4f} (KL {parts['kl']:.4f}, "
                                              f"hidden MSE {parts['hidden_mse']:.4f})")

        losses = train_student(student, teacher, data, steps=steps, batch=cfg.batch, seq_len=cfg.seq_len,
                               lr=cfg.lr, hidden_weight=cfg.hidden_weight, seed=cfg.seed + 1,
                               param_groups=[{"params": params}], on_step=on_step, amp=amp)
    for m in student.modules():
        method = methods.of_layer(m)
        if method is not None:
            method.after_training(m)
    for p in student.parameters():
        p.requires_grad_(False)
    return losses


def quantize(teacher: nn.Module, data: TokenData, cfg: QuantConfig, progress: Progress = _quiet, *,
             device: torch.device | str = "cpu",
             amp: Callable[[], AbstractContextManager] = contextlib.nullcontext) -> tuple[nn.Module, dict]:
    """Initialization + QAT on `device` (the teacher and the token streams are moved there);
    returns the (fake-quantized) student and what happened."""
    teacher, data = teacher.to(device), data.to(device)
    student, info = build_student(teacher, data, cfg, progress)
    info["losses"] = train(student, teacher, data, cfg, progress, amp)
    info["tokens"] = cfg.tokens
    return student.eval(), info


def pack(student: nn.Module) -> nn.Module:
    """The same model with every quantized layer replaced by its packed-kernel form."""
    packed = copy.deepcopy(student)
    for name, m in list(packed.named_modules()):
        method = methods.of_layer(m)
        if method is not None:
            set_module(packed, name, method.pack(m))
    return packed.eval()
