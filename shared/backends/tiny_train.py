"""Training a tiny decoder in-process, so demos and tests own their models end to end.

Documents are packed into one byte stream (each wrapped in BOS ... EOS, so the model learns where
an answer ends) and random windows are drawn from it. Everything random flows from `seed`
through private generators, so two runs with one seed give identical weights and the caller's
global torch RNG is left untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from paperworks.shared.backends.errors import InvalidRequest
from paperworks.shared.backends.tiny_model import ByteTokenizer, TinyConfig, TinyDecoder
from paperworks.shared.devices import autocast


@dataclass
class TrainResult:
    module: TinyDecoder
    losses: list[float]


def train_tiny_lm(
    texts: Sequence[str],
    config: TinyConfig,
    *,
    steps: int,
    seed: int,
    batch_size: int = 8,
    seq_len: int | None = None,
    lr: float = 3e-3,
    warmup_steps: int | None = None,
    device: str = "cpu",
) -> TrainResult:
    """Train a fresh `TinyDecoder` for `steps` AdamW steps with a warmup + cosine schedule;
    `seq_len` defaults to the config's context. Returns the module (in eval mode, on `device`)
    and the per-step training losses. The initialisation and the windows are drawn on the CPU
    from `seed` (the same model on any device), the forward runs under bf16 autocast on CUDA."""
    seq_len = seq_len or config.max_seq_len
    if not 1 < seq_len <= config.max_seq_len:
        raise InvalidRequest("seq_len", f"must be in 2..{config.max_seq_len}, got {seq_len}")
    if steps < 1:
        raise InvalidRequest("steps", f"must be >= 1, got {steps}")
    tokenizer = ByteTokenizer()
    stream = torch.tensor(
        [i for text in texts for i in tokenizer.encode(text, add_eos=True)], dtype=torch.long
    )
    if len(stream) == 0:
        raise InvalidRequest("texts", "no training text given")
    if len(stream) < seq_len + 1:
        stream = stream.repeat(math.ceil((seq_len + 1) / len(stream)))

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = TinyDecoder(config)
    place = torch.device(device)
    module.to(place)
    rng = torch.Generator().manual_seed(seed)
    warmup = warmup_steps if warmup_steps is not None else max(1, steps // 10)
    optimizer = torch.optim.AdamW(module.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, warmup, steps))
    offsets = torch.arange(seq_len + 1)
    losses = []
    module.train()
    for _ in range(steps):
        starts = torch.randint(0, len(stream) - seq_len, (batch_size,), generator=rng)
        window = stream[starts[:, None] + offsets].to(place)
        with autocast(device):
            logits = module(window[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.detach())  # read once at the end: no device sync per step
    # (a model placed on the meta device, as placement tests do, has shapes but no values)
    values = [] if place.type == "meta" else torch.stack(losses).float().cpu().tolist()
    return TrainResult(module=module.eval(), losses=values)


def _lr_factor(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
