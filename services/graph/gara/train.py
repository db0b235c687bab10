"""Training and answering (§4.4): answer-token likelihood over a mix of source graphs, the LM frozen.

Loss: −Σ log p(answer tokens | prompt; W(G)) over the answer positions only. Each step draws a few
source graphs and queries about them; the graphs' conditioning (`GaRAModel.condition`) is computed
once per step and indexed per query. Convergence is judged on validation graphs: the trainable
state with the best validation accuracy is kept (early stopping with patience). Zero-shot
answering computes the conditioning once per unseen graph and scores every option's tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from paperworks.services.graph.gara.encoder import GraphBatch
from paperworks.services.graph.gara.lora import GENERATED_ARMS, GaRAModel


@dataclass
class Batch:
    """Queries about `graphs`: prompt and answer token ids, `graph_index[b]` the graph of query b."""

    graphs: GraphBatch | None
    prompts: list[list[int]]
    answers: list[list[int]]
    graph_index: torch.Tensor


def pack(prompts: list[list[int]], answers: list[list[int]], pad_id: int, device="cpu"):
    """Right-padded ids (B, T), attention mask and the mask of answer-token positions."""
    seqs = [p + a for p, a in zip(prompts, answers, strict=True)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(seqs), width), dtype=torch.long)
    target = torch.zeros((len(seqs), width), dtype=torch.bool)
    for i, (p, s) in enumerate(zip(prompts, seqs, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        attention[i, : len(s)] = 1
        target[i, len(p) : len(s)] = True
    return ids.to(device), attention.to(device), target.to(device)


def token_logprobs(model: GaRAModel, ids, attention, target, condition, graph_index) -> torch.Tensor:
    """Σ log p(target tokens) per sequence (B,)."""
    logits = model(ids, attention, condition, graph_index)[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
    return (logp * target[:, 1:]).sum(dim=1)


def answer_loss(model: GaRAModel, batch: Batch, pad_id: int, device) -> tuple[torch.Tensor, dict | None]:
    ids, attention, target = pack(batch.prompts, batch.answers, pad_id, device)
    condition = model.condition(batch.graphs.to(device)) if batch.graphs is not None else None
    logits = model(ids, attention, condition, batch.graph_index.to(device))[:, :-1].float()
    labels = ids[:, 1:].masked_fill(~target[:, 1:], -100)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)), condition


@torch.no_grad()
def option_probabilities(
    model: GaRAModel,
    condition,
    prompts: list[list[int]],
    options: list[list[int]],
    graph_index: torch.Tensor,
    pad_id: int,
    device,
) -> torch.Tensor:
    """p(option | prompt, graph) over the closed option set: softmax of each option's summed token
    log-likelihood. (B, n_options)."""
    n = len(options)
    if all(len(o) == 1 for o in options):  # one forward: the options' next-token log-probabilities
        ids, attention, _ = pack(prompts, [[] for _ in prompts], pad_id, device)
        index = graph_index.to(device) if graph_index is not None else None
        logits = model(ids, attention, condition, index).float()
        last = attention.sum(1) - 1
        logp = torch.log_softmax(logits[torch.arange(len(prompts), device=logits.device), last], dim=-1)
        return torch.softmax(logp[:, [o[0] for o in options]], dim=-1)
    ids, attention, target = pack(
        [p for p in prompts for _ in range(n)], options * len(prompts), pad_id, device
    )
    index = graph_index.to(device).repeat_interleave(n) if graph_index is not None else None
    scores = token_logprobs(model, ids, attention, target, condition, index).view(len(prompts), n)
    return torch.softmax(scores, dim=-1)


@dataclass
class FitResult:
    best_step: int
    best_validation: float
    history: list[dict]


def fit(
    model: GaRAModel,
    sample: Callable[[int], Batch],
    validate: Callable[[], float],
    *,
    steps: int,
    lr: float,
    pad_id: int,
    device="cpu",
    eval_every: int = 25,
    patience: int = 8,
    weight_decay: float = 0.0,
    on_step: Callable[[int, dict], None] | None = None,
) -> FitResult:
    """AdamW on the arm's trainable parameters for at most `steps` steps; every `eval_every` steps
    the validation accuracy (and, for generated arms, the norm ratio column_l1(G)/column_l1(L) of
    the factors actually used and of the raw generator output) is recorded; the best state by
    validation accuracy is restored at the end; stops after `patience` evaluations without gain."""
    params = [p for p in model.parameters() if p.requires_grad]
    history: list[dict] = []
    best = (validate(), 0, model.trainable_state())
    history.append({"step": 0, "validation_accuracy": best[0]})
    if not params:
        return FitResult(0, best[0], history)
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    stale = 0
    for step in range(1, steps + 1):
        model.train()
        batch = sample(step)
        loss, _ = answer_loss(model, batch, pad_id, device)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        record = {"step": step, "loss": float(loss.detach())}
        if step % eval_every == 0 or step == steps:
            model.eval()
            record["validation_accuracy"] = validate()
            if model.arm in GENERATED_ARMS:  # the factors the updated parameters now produce
                with torch.no_grad():
                    graphs = batch.graphs.to(device)
                    record["norm_ratio"] = model.norm_ratio(model.condition(graphs))
                    record["raw_norm_ratio"] = model.norm_ratio(model.raw_factors(graphs))
            history.append(record)
            if record["validation_accuracy"] > best[0] + 1e-9:
                best, stale = (record["validation_accuracy"], step, model.trainable_state()), 0
            else:
                stale += 1
        if on_step is not None:
            on_step(step, record)
        if stale >= patience:
            break
    model.load_trainable_state(best[2])
    model.eval()
    return FitResult(best[1], best[0], history)
