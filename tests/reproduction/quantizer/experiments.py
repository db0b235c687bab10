"""The papers' claims in miniature, shared by the reproduction tests and the benchmark.

A tiny Llama-style decoder (the project's `TinyDecoder`) is trained on this interpreter's
standard-library sources, then quantized to 2 bits per weight by each method and by its
baseline, all in the same run and from the same teacher:

1. RaBiT vs independent-latent two-path QAT: same step-0 model (function-aware init), same
   steps and learning rate; the per-layer path correlations at step 0 and after QAT, and the
   held-out loss: the QAT objective (KL to the teacher + hidden-state MSE, RaBiT Sec. 3.4) on
   the validation windows, and the next-token loss on them.
2. LC-QAT: step 0 of QAT reproduces the PTQ model; PTQ vs round-to-nearest 2-bit scalar;
   LC-QAT with a tenth of the training tokens vs scalar 2-bit QAT with all of them.
3. The packed model (kernel library) vs the fake-quantized one, and stored bits per weight.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field

import torch
from paperworks.services.quantizer import diagnostics, lcqat, quantize
from paperworks.services.quantizer.distill import TokenData, distill_loss, evaluate_lm
from paperworks.services.quantizer.linears import forward
from paperworks.shared.backends.tiny_data import stdlib_texts
from paperworks.shared.backends.tiny_model import ByteTokenizer, TinyConfig, TinyDecoder
from paperworks.shared.backends.tiny_train import train_tiny_lm
from torch import nn

# The tuning budget of the LC-QAT claim: LC-QAT's learning rates were tried at these three values
# (QAT lr 3e-4 / 1e-3 on seeds 3-5, its continuous parameters at 1e-3 / 3e-3), so scalar QAT
# gets the same three, on the validation seeds 3-5, never on the asserted seeds 0-2.
SCALAR_LRS = (3e-4, 1e-3, 3e-3)
VALIDATION_SEEDS = (3, 4, 5)


@dataclass(frozen=True)
class Setup:
    seed: int = 0
    files: int = 60
    max_chars: int = 8000
    model: TinyConfig = field(default_factory=lambda: TinyConfig(dim=64, n_layers=2, n_heads=4,
                                                                 mlp_hidden=176, max_seq_len=64))
    teacher_steps: int = 400
    qat_steps: int = 150
    lr: float = 3e-4
    block_steps: int = 100
    block_latent_lr: float = 0.01  # LC-QAT's block reconstruction trains the code latents too
    lcqat_calib_windows: int = 128  # LC-QAT's PTQ calibration windows (8,192 tokens)
    e2e_steps: int = 128  # LC-QAT's PTQ ends with end-to-end steps on those windows, 16 at a time
    e2e_latent_lr: float = 0.01
    val_windows: int = 64
    # Scalar QAT's lr, chosen like LC-QAT's: the same number of values (SCALAR_LRS) on the
    # validation seeds 3-5 (`tune_scalar_lr`, recorded in results/quantizer.json).
    scalar_lr: float = 1e-3  # mean val loss on seeds 3-5: 1.4433 / 1.4420 / 1.4522 at 3e-4 / 1e-3 / 3e-3

    def config(self, method: str, steps: int) -> quantize.QuantConfig:
        lc = ({"calib_windows": self.lcqat_calib_windows, "e2e_steps": self.e2e_steps,
               "e2e_latent_lr": self.e2e_latent_lr} if method == "lcqat" else {})
        lr = self.scalar_lr if method == "scalar_qat" else self.lr
        return quantize.QuantConfig(method=method, steps=steps, lr=lr, block_steps=self.block_steps,
                                    block_latent_lr=self.block_latent_lr, seq_len=self.model.max_seq_len,
                                    seed=self.seed, **lc)


@dataclass
class Teacher:
    module: TinyDecoder
    data: TokenData
    val: torch.Tensor  # held-out windows
    calib: torch.Tensor  # windows for the diagnostics


def train_teacher(setup: Setup) -> Teacher:
    texts = stdlib_texts(max_files=setup.files, max_chars=setup.max_chars, seed=setup.seed)
    trained = train_tiny_lm(texts, setup.model, steps=setup.teacher_steps, seed=setup.seed, batch_size=16)
    tok = ByteTokenizer()
    data = TokenData.from_ids([i for t in texts for i in tok.encode(t, add_eos=True)])
    seq = setup.model.max_seq_len
    return Teacher(trained.module, data, data.valid_windows(seq, setup.val_windows),
                   data.calib(seq, 16, setup.seed + 7))


def val_loss(model: nn.Module, teacher: Teacher) -> float:
    return evaluate_lm(model, teacher.val)["loss"]


@torch.no_grad()
def held_out_distill(student: nn.Module, teacher: Teacher, hidden_weight: float = 1.0) -> dict:
    """The QAT objective on the validation windows: KL to the teacher + hidden-state MSE."""
    total, kl, mse = distill_loss(student, teacher.module, teacher.val, hidden_weight)
    return {"val_distill": float(total), "val_kl": float(kl), "val_hidden_mse": float(mse)}


def coupling(teacher: Teacher, setup: Setup) -> dict:
    """Claim 1: RaBiT vs independent-latent two-path QAT at the same steps, from one step-0 model."""
    out = {"full_precision": val_loss(teacher.module, teacher)}
    step0, _ = quantize.build_student(teacher.module, teacher.data, setup.config("rabit", 0))
    out["step0"] = {"val_loss": val_loss(step0, teacher), **held_out_distill(step0, teacher),
                    **diagnostics.summary(diagnostics.layer_report(step0, teacher.module, teacher.calib))}
    for method in ("rabit", "independent"):
        start = time.perf_counter()
        student, _ = quantize.quantize(teacher.module, teacher.data, setup.config(method, setup.qat_steps))
        report = diagnostics.layer_report(student, teacher.module, teacher.calib)
        out[method] = {"val_loss": val_loss(student, teacher), **held_out_distill(student, teacher),
                       "layers": report, **diagnostics.summary(report),
                       "seconds": time.perf_counter() - start, "student": student}
    return out


@torch.no_grad()
def logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return forward(model, ids)[0]


def lcqat_vs_scalar(teacher: Teacher, setup: Setup) -> dict:
    """Claim 2: exact QAT start, PTQ vs RTN, LC-QAT on a tenth of the tokens vs scalar QAT."""
    start = time.perf_counter()
    tenth = setup.config("lcqat", setup.qat_steps // 10)
    ptq, _ = quantize.build_student(teacher.module, teacher.data, tenth)
    ptq_logits = logits(ptq, teacher.val[:8])
    qat = copy.deepcopy(ptq)
    quantize.trainable(qat)  # switches every layer to its continuous latent
    step0_diff = float((logits(qat, teacher.val[:8]) - ptq_logits).abs().max())
    quantize.train(qat, teacher.module, teacher.data, tenth)
    rtn, _ = quantize.quantize(teacher.module, teacher.data, setup.config("rtn", 0))
    scalar_cfg = setup.config("scalar_qat", setup.qat_steps)
    scalar, _ = quantize.quantize(teacher.module, teacher.data, scalar_cfg)
    changed = sum(int((q.codes != p.codes).sum())
                  for q, p in zip(lcqat.lc_layers(qat), lcqat.lc_layers(ptq), strict=True))
    return {"step0_max_abs_logit_diff": step0_diff, "ptq_val_loss": val_loss(ptq, teacher),
            "ptq_calibration_tokens": tenth.calib_windows * tenth.seq_len, "qat_codes_changed": changed,
            "rtn_val_loss": val_loss(rtn, teacher), "lcqat_val_loss": val_loss(qat, teacher),
            "lcqat_tokens": tenth.tokens, "scalar_qat_val_loss": val_loss(scalar, teacher),
            "scalar_qat_tokens": scalar_cfg.tokens, "seconds": time.perf_counter() - start,
            "students": {"lcqat": qat, "scalar_qat": scalar}}


def packed_vs_fake(student: nn.Module, ids: torch.Tensor) -> tuple[nn.Module, float, float]:
    """(packed model, max |logit difference|, max |logit|) of packed vs fake-quantized."""
    packed = quantize.pack(student)
    fake, real = logits(student, ids), logits(packed, ids)
    return packed, float((fake - real).abs().max()), float(fake.abs().max())


def scalar_qat_val_loss(teacher: Teacher, setup: Setup, lr: float) -> float:
    """Held-out loss of scalar 2-bit QAT at learning rate `lr` (all of its tokens)."""
    cfg = dataclasses.replace(setup.config("scalar_qat", setup.qat_steps), lr=lr)
    student, _ = quantize.quantize(teacher.module, teacher.data, cfg)
    return val_loss(student, teacher)


def tune_scalar_lr(setup: Setup, seeds=VALIDATION_SEEDS, lrs=SCALAR_LRS) -> dict:
    """Scalar QAT's lr sweep on the validation seeds: held-out loss per lr and seed, and the lr with
    the lowest mean (the baseline's tuning budget, equal to LC-QAT's)."""
    losses = {}
    for seed in seeds:
        s = dataclasses.replace(setup, seed=seed)
        teacher = train_teacher(s)
        losses[seed] = {lr: scalar_qat_val_loss(teacher, s, lr) for lr in lrs}
    means = {lr: sum(losses[seed][lr] for seed in seeds) / len(seeds) for lr in lrs}
    return {"seeds": list(seeds), "lrs": list(lrs), "val_loss": {str(k): {str(lr): v for lr, v in d.items()}
                                                                 for k, d in losses.items()},
            "mean_val_loss": {str(lr): v for lr, v in means.items()}, "chosen": min(means, key=means.get)}
