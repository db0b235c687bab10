"""Running the method on the generated world: graphs prepared once (node features from the frozen
LM, fixed evaluation queries), the training sampler, one arm's training, zero-shot accuracy. Used
by the jobs and by the reproduction tests, so both measure the same thing."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch
from paperworks.services.graph import world
from paperworks.services.graph.gara import GaRAModel, batch_graphs
from paperworks.services.graph.gara.train import Batch, FitResult, fit, option_probabilities


class Prepared:
    """Graphs with node features (the LM's mean input embedding of each node's text, or the
    graph's own numeric features) and `queries` fixed (prompt, answer) pairs per graph."""

    def __init__(self, lm, tokenizer, graphs: list[world.TaskGraph], seed: int, queries: int = 16):
        self.graphs = graphs
        self.tensors = [(graph_features(lm, tokenizer, g), g.edge_index()) for g in graphs]
        rng = np.random.default_rng(seed)
        self.queries = [g.queries(rng, queries) for g in graphs]


def graph_features(lm, tokenizer, g: world.TaskGraph) -> torch.Tensor:
    if g.features is not None:
        return torch.as_tensor(g.features, dtype=torch.float32)
    return world.node_features(lm, tokenizer, g.texts).cpu()


def options(tokenizer) -> list[list[int]]:
    return [tokenizer.encode(r, bos=False) for r in world.ROLES]


@torch.no_grad()
def accuracy(model: GaRAModel, tokenizer, data: Prepared, device="cpu", chunk: int = 16) -> float:
    """Fraction of the fixed queries whose most probable option is the answer (conditioning once
    per graph, as zero-shot serving does)."""
    model.eval()
    correct = total = 0
    opts = options(tokenizer)
    for start in range(0, len(data.graphs), chunk):
        idx = range(start, min(start + chunk, len(data.graphs)))
        condition = model.condition(batch_graphs([data.tensors[i] for i in idx]).to(device))
        prompts, answers, index = [], [], []
        for j, i in enumerate(idx):
            for p, a in data.queries[i]:
                prompts.append(tokenizer.encode(p))
                answers.append(world.ROLES.index(a))
                index.append(j)
        probs = option_probabilities(
            model, condition, prompts, opts, torch.tensor(index), tokenizer.pad_id, device
        )
        correct += int((probs.argmax(1).cpu() == torch.tensor(answers)).sum())
        total += len(answers)
    return correct / max(total, 1)


def sampler(train: Prepared, tokenizer, seed: int, graphs_per_step: int = 8, queries_per_graph: int = 8):
    """step -> Batch: `graphs_per_step` source graphs, `queries_per_graph` fresh queries each."""
    rng = np.random.default_rng(seed)
    per_step = min(graphs_per_step, len(train.graphs))

    def sample(_step: int) -> Batch:
        chosen = rng.choice(len(train.graphs), per_step, replace=False)
        prompts, answers, index = [], [], []
        for j, i in enumerate(chosen):
            for p, a in train.graphs[i].queries(rng, queries_per_graph):
                prompts.append(tokenizer.encode(p))
                answers.append(tokenizer.encode(a, bos=False))
                index.append(j)
        return Batch(batch_graphs([train.tensors[i] for i in chosen]), prompts, answers, torch.tensor(index))

    return sample


def build(lm, arm: str, rank: int, hidden: int, targets, seed: int, device="cpu") -> GaRAModel:
    """One arm around a private copy of the frozen LM."""
    return GaRAModel(
        copy.deepcopy(lm),
        arm,
        lm.get_input_embeddings().embedding_dim,
        targets=targets,
        rank=rank,
        hidden=hidden,
        seed=seed,
    ).to(device)


def train_arm(
    lm,
    tokenizer,
    arm: str,
    train: Prepared,
    val: Prepared,
    *,
    steps: int,
    lr: float,
    rank: int = 4,
    hidden: int = 64,
    targets=("q_proj", "v_proj"),
    seed: int = 0,
    device="cpu",
    eval_every: int = 50,
    queries_per_graph: int = 8,
    patience: int = 6,
    on_step: Callable[[int, dict], None] | None = None,
) -> tuple[GaRAModel, FitResult]:
    model = build(lm, arm, rank, hidden, targets, seed, device)
    result = fit(
        model,
        sampler(train, tokenizer, seed, queries_per_graph=queries_per_graph),
        lambda: accuracy(model, tokenizer, val, device),
        steps=steps,
        lr=lr,
        pad_id=tokenizer.pad_id,
        device=device,
        eval_every=eval_every,
        patience=patience,
        on_step=on_step,
    )
    return model, result
