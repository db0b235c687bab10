"""Router fine-tuning of an upcycled Hugging Face MoE with the router-loss mix (DPSL and its peers,
`dpsl.losses`): only the routers (`mlp.gate.weight` of every layer) train, on next-token prediction
of text windows plus the router terms; experts, attention and embeddings stay frozen. Right after a
copy upcycle the experts are identical, so the language-model loss does not depend on the routing
and the router terms alone shape it (the DPSL paper's point: the prior gives the routers a target
where the task gives none).

The routing of a forward pass is read from transformers' `output_router_logits` (per layer, the
router's logits before top-k), so a record holds the same logits / probabilities / top-k selection
as the service's own `MoEFFN.record`. The aux-loss-free bias needs a selection bias the transformers
routers do not have, and per-modality priors need modalities text does not have: both refused.
Pure PyTorch and transformers; no platform imports.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch.nn import functional as F

from .dpsl.losses import RouterLoss, RouterTerm
from .dpsl.metrics import routing_metrics, summarize


def routers(moe: torch.nn.Module) -> list[torch.nn.Parameter]:
    """Every layer's router weight (E, H)."""
    return [layer.mlp.gate.weight for layer in moe.model.layers]


def check_terms(terms: list[RouterTerm]) -> None:
    """ValueError naming the term a transformers MoE cannot take."""
    for i, t in enumerate(terms):
        if t.type == "aux_free_bias":
            raise ValueError(f"router term {i}: the transformers routers have no selection bias")
        if t.per_modality:
            raise ValueError(f"router term {i}: text tokens have no modality for a per-modality prior")


def forward(moe: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, list[dict]]:
    """(next-token loss, routing records per layer) of a batch of token windows (B, L + 1)."""
    out = moe(input_ids=ids[:, :-1], output_router_logits=True, use_cache=False)
    loss = F.cross_entropy(out.logits.float().reshape(-1, out.logits.shape[-1]), ids[:, 1:].reshape(-1))
    k = moe.config.num_experts_per_tok
    records = []
    for logits in out.router_logits:
        probs = logits.float().softmax(-1)
        records.append({"logits": logits, "probs": probs, "selected": probs.topk(k, -1).indices})
    return loss, records


def fit_routers(
    moe: torch.nn.Module,
    windows: torch.Tensor,
    terms: list[RouterTerm],
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    on_step: Callable[[int, dict], None] | None = None,
    track_every: int = 10,
) -> list[dict]:
    """AdamW with cosine decay on the routers only; `windows` (T, L + 1) token ids on the model's
    device. Returns the per-step history (losses; the layers' routing metrics every `track_every`
    steps and at the last)."""
    check_terms(terms)
    gates = routers(moe)
    for p in moe.parameters():
        p.requires_grad_(False)
    for p in gates:
        p.requires_grad_(True)
    router_loss = RouterLoss(terms, gates[0].shape[0], windows.device)
    opt = torch.optim.AdamW(gates, lr=learning_rate, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + np.cos(np.pi * min(s, steps) / steps))
    )
    gen = torch.Generator().manual_seed(seed)
    history = []
    moe.train()
    for step in range(steps):
        rows = torch.randint(0, windows.shape[0], (batch_size,), generator=gen).to(windows.device)
        task, records = forward(moe, windows[rows])
        extra, parts = router_loss(records, step) if terms else (0.0, {})
        opt.zero_grad(set_to_none=True)
        (task + extra).backward()
        opt.step()
        sched.step()
        record = {"step": step + 1, "task_loss": float(task.detach()), **parts}
        if track_every and (step % track_every == 0 or step == steps - 1):
            record |= summarize([routing_metrics(r) for r in records])
        history.append(record)
        if on_step is not None:
            on_step(step + 1, record)
    for p in moe.parameters():
        p.requires_grad_(True)
    moe.eval()
    return history


@torch.no_grad()
def evaluate(moe: torch.nn.Module, windows: torch.Tensor, prior=None, batch_size: int = 16) -> dict:
    """Next-token loss and per-layer routing metrics (CvM distance to `prior`) on held-out windows."""
    moe.eval()
    losses, per_layer = [], None
    for start in range(0, windows.shape[0], batch_size):
        loss, records = forward(moe, windows[start : start + batch_size])
        losses.append(float(loss) * min(batch_size, windows.shape[0] - start))
        if per_layer is None:
            per_layer = [[] for _ in records]
        for i, r in enumerate(records):
            per_layer[i].append(r)
    merged = [{k: torch.cat([r[k] for r in rs]) for k in ("probs", "selected")} for rs in per_layer]
    layers = [routing_metrics(r, None, prior) for r in merged]
    return {"task_loss": sum(losses) / windows.shape[0], **summarize(layers), "layers": layers}
