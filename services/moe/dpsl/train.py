"""Training and evaluation loops: the dense model, then the upcycled MoE with a router-loss mix
(`L = L_task + sum_t w_t L_t`, DPSL's total loss with its optional peers), and routing evaluation
on held-out batches."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch.nn import functional as F

from .losses import RouterLoss, RouterTerm
from .metrics import routing_metrics, summarize
from .model import ModelConfig, TokenClassifier
from .world import Batch, World


def build_dense(config: ModelConfig, seed: int, device="cpu") -> TokenClassifier:
    torch.manual_seed(seed)
    return TokenClassifier(ModelConfig(**(config.as_dict() | {"experts": 0}))).to(device)


def fit(
    model: TokenClassifier,
    world: World,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    device="cpu",
    terms: list[RouterTerm] | None = None,
    router_learning_rate: float | None = None,
    on_step: Callable[[int, dict], None] | None = None,
    track_every: int = 10,
) -> list[dict]:
    """AdamW with cosine decay on the task loss plus the router terms (MoE models); the router may
    take its own learning rate. Returns the per-step history (losses, and the layers' routing
    metrics every `track_every` steps and at the last; 0: never, which leaves training unchanged)."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    moe = model.moe_layers()
    router_loss = RouterLoss(terms or [], moe[0].experts, device) if moe else None
    router_params = [p for m in moe for p in m.router.parameters()]
    ids = {id(p) for p in router_params}
    groups = [{"params": [p for p in model.parameters() if id(p) not in ids], "lr": learning_rate}]
    if router_params:
        groups.append({"params": router_params, "lr": router_learning_rate or learning_rate})
    opt = torch.optim.AdamW(groups, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + np.cos(np.pi * min(s, steps) / steps))
    )
    history = []
    model.train()
    for step in range(steps):
        batch = world.sample(rng, batch_size, device=device)
        logits = model(batch.x)
        task = F.cross_entropy(logits, batch.labels)
        loss, parts = task, {}
        if router_loss is not None:
            extra, parts = router_loss(model.routing(), step, batch.token_modality())
            loss = loss + extra
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if router_loss is not None and router_loss.bias_rate:
            for m in moe:
                m.update_bias(router_loss.bias_rate)
        record = {"step": step + 1, "task_loss": float(task.detach()), **parts}
        if moe and track_every and (step % track_every == 0 or step == steps - 1):
            record |= summarize([routing_metrics(r, batch.token_modality()) for r in model.routing()])
        history.append(record)
        if on_step is not None:
            on_step(step + 1, record)
    model.eval()
    return history


@torch.no_grad()
def evaluate(model: TokenClassifier, batch: Batch, prior=None) -> dict:
    """Accuracy and, for an MoE, per-layer routing metrics on one held-out batch."""
    model.eval()
    logits = model(batch.x)
    out = {"accuracy": float((logits.argmax(1) == batch.labels).float().mean())}
    if model.moe_layers():
        layers = [routing_metrics(r, batch.token_modality(), prior) for r in model.routing()]
        out |= summarize(layers) | {"layers": layers}
    return out


@torch.no_grad()
def route(model: TokenClassifier, x: torch.Tensor) -> torch.Tensor:
    """Router probabilities (layers, B, L, E) of a batch of token features (B, L, d_in)."""
    model.eval()
    model(x)
    b, length = x.shape[:2]
    return torch.stack([r["probs"].reshape(b, length, -1) for r in model.routing()])
