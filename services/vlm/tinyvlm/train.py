"""Supervised training and batched inference for TinyVLM over the closed answer set.

`fit` is plain cross-entropy on the answer token (pretraining on generated data, the SFT warm-up
before RL, and preference-steering SFT all use it); `probabilities` and `lens_probabilities` run the
model without gradients in batches, the latter with the logit lens at every LM layer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from paperworks.services.vlm.tinyvlm.model import TinyVLM, VLMConfig, answer_logprobs
from torch.nn import functional as F


def build(config: VLMConfig, seed: int, device: str) -> TinyVLM:
    torch.manual_seed(seed)
    return TinyVLM(config).to(device)


def fit(
    model: TinyVLM,
    batches: Callable[[int], tuple],
    steps: int,
    lr: float,
    device: str,
    on_step: Callable[[int, float], None] | None = None,
    weight_decay: float = 0.01,
) -> float:
    """`steps` AdamW steps on batches(step) -> (images, tokens, labels) numpy arrays; returns the
    mean loss of the last tenth of the steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    losses = []
    for step in range(1, steps + 1):
        images, tokens, labels = batches(step)
        logp = answer_logprobs(
            model(torch.as_tensor(images, device=device), torch.as_tensor(tokens, device=device))
        )
        loss = F.nll_loss(logp, torch.as_tensor(labels, device=device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return float(np.mean(losses[-max(1, steps // 10) :]))


@torch.no_grad()
def probabilities(
    model: TinyVLM, images: np.ndarray, tokens: np.ndarray, device: str, batch: int = 1024, **forward
) -> np.ndarray:
    """p over the answer set, (N, |A|) float64."""
    model.eval()
    out = []
    for i in range(0, len(images), batch):
        logits = model(
            torch.as_tensor(images[i : i + batch], device=device),
            torch.as_tensor(tokens[i : i + batch], device=device),
            **forward,
        )
        out.append(answer_logprobs(logits).exp().double().cpu().numpy())
    return np.concatenate(out)


@torch.no_grad()
def lens_probabilities(
    model: TinyVLM, images: np.ndarray, tokens: np.ndarray, device: str, batch: int = 1024
) -> np.ndarray:
    """The logit lens: p over the answer set read at every LM layer, (N, layers, |A|)."""
    model.eval()
    out = []
    for i in range(0, len(images), batch):
        _, states = model(
            torch.as_tensor(images[i : i + batch], device=device),
            torch.as_tensor(tokens[i : i + batch], device=device),
            hidden=True,
        )
        out.append(
            torch.stack([answer_logprobs(model.lens(h)).exp() for h in states], 1).double().cpu().numpy()
        )
    return np.concatenate(out)


def accuracy(
    model: TinyVLM, images: np.ndarray, tokens: np.ndarray, labels: np.ndarray, device: str
) -> float:
    return float((probabilities(model, images, tokens, device).argmax(1) == labels).mean())
