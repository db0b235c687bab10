"""Training against the full-precision teacher, shared by every method: token data, the
distillation loss (KL to the full-precision teacher plus hidden-state MSE, RaBiT's training
objective, Sec. 3.4, used for LC-QAT's QAT too), a training loop and evaluation. Pure PyTorch.

Design choices (not from the papers): token windows are drawn uniformly from one packed
stream; the hidden-state MSE is averaged over every block's output, normalised by the
teacher's mean square so that the weight `hidden_weight` is scale free.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .linears import forward


@dataclass
class TokenData:
    """One packed id stream split into train / validation parts."""

    train: torch.Tensor
    valid: torch.Tensor

    @classmethod
    def from_ids(cls, ids: list[int], valid_fraction: float = 0.1) -> TokenData:
        t = torch.tensor(ids, dtype=torch.long)
        cut = int(len(t) * (1 - valid_fraction))
        return cls(train=t[:cut], valid=t[cut:])

    def to(self, device: torch.device | str) -> TokenData:
        """The same streams on `device`, so every window and batch drawn from them is there."""
        return TokenData(train=self.train.to(device), valid=self.valid.to(device))

    def batches(self, seq_len: int, batch: int, seed: int) -> Iterator[torch.Tensor]:
        rng = torch.Generator().manual_seed(seed)
        offsets = torch.arange(seq_len)
        while True:
            starts = torch.randint(0, len(self.train) - seq_len, (batch,), generator=rng)
            yield self.train[starts[:, None] + offsets]

    def valid_windows(self, seq_len: int, max_windows: int = 64) -> torch.Tensor:
        """Consecutive held-out windows."""
        n = min(max_windows, len(self.valid) // seq_len)
        return self.valid[: n * seq_len].reshape(n, seq_len)

    def windows(self, seq_len: int, max_windows: int) -> torch.Tensor:
        """Consecutive windows over the whole stream (for evaluating on a dataset of its own)."""
        stream = torch.cat([self.train, self.valid])
        n = min(max_windows, len(stream) // seq_len)
        return stream[: n * seq_len].reshape(n, seq_len)

    def calib(self, seq_len: int, n: int, seed: int) -> torch.Tensor:
        return next(self.batches(seq_len, n, seed + 99))


def distill_loss(student: nn.Module, teacher: nn.Module, ids: torch.Tensor, hidden_weight: float):
    """KL(teacher || student) per token + hidden_weight * normalised hidden-state MSE."""
    with torch.no_grad():
        t_logits, t_hidden = forward(teacher, ids, hidden=hidden_weight > 0)
    s_logits, s_hidden = forward(student, ids, hidden=hidden_weight > 0)
    kl = F.kl_div(s_logits.log_softmax(-1), t_logits.log_softmax(-1), log_target=True,
                  reduction="none").sum(-1).mean()
    mse = kl.new_zeros(())
    if hidden_weight > 0:
        terms = [((s - t) ** 2).mean() / (t**2).mean().clamp_min(1e-8)
                 for s, t in zip(s_hidden[1:], t_hidden[1:], strict=True)]
        mse = torch.stack(terms).mean()
    return kl + hidden_weight * mse, kl.detach(), mse.detach()


def train_student(student: nn.Module, teacher: nn.Module, data: TokenData, *, steps: int, batch: int,
                  seq_len: int, lr: float, hidden_weight: float, seed: int,
                  param_groups: list[dict] | None = None,
                  on_step: Callable[[int, dict], None] | None = None,
                  amp: Callable[[], AbstractContextManager] = contextlib.nullcontext) -> list[float]:
    """Adam on the student's trainable parameters with a cosine decay; returns per-step losses.
    The forward passes run inside `amp()` (bf16 autocast on CUDA, say); the latent weights, the
    optimizer and the backward pass stay float32."""
    params = param_groups or [{"params": [p for p in student.parameters() if p.requires_grad]}]
    if steps <= 0 or not any(g["params"] for g in params):
        return []
    opt = torch.optim.Adam(params, lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    student.train()
    losses = []
    for step, ids in zip(range(steps), data.batches(seq_len, batch, seed), strict=False):
        with amp():
            loss, kl, mse = distill_loss(student, teacher, ids, hidden_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if on_step:
            on_step(step + 1, {"loss": loss.item(), "kl": kl.item(), "hidden_mse": mse.item()})
    student.eval()
    return losses


@torch.no_grad()
def evaluate_lm(module: nn.Module, windows: torch.Tensor, batch: int = 16) -> dict:
    """Mean next-token NLL (nats), perplexity and bits per token over the windows."""
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        ids = windows[i : i + batch]
        logits, _ = forward(module, ids)
        ids = ids.to(logits.device)
        nll = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                              reduction="sum")
        total, count = total + nll.item(), count + ids[:, 1:].numel()
    loss = total / max(count, 1)
    return {"loss": loss, "perplexity": math.exp(min(loss, 50)), "bits_per_token": loss / math.log(2),
            "tokens": count}
