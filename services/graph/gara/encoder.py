"""The graph side of GaRA (§4.1): a GNN over the whole graph and graph-level max pooling,
h = MaxPool(GNN(X, A)).

Each layer is a sum-aggregation message pass in pure PyTorch (`index_add_` over the edge list):
    h_v ← MLP([h_v, Σ_{u∈N(v)} h_u / d̄_G]),
where d̄_G is the graph's mean degree (so graphs of very different density share one scale without
hiding which node is better connected). Max pooling over each graph's nodes gives h ∈ R^{hidden}.
Several graphs are batched as one disjoint union (`batch_graphs`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class GraphBatch:
    """A disjoint union of graphs: node features x (N, f), directed edge list (2, E) holding both
    directions of every undirected edge, `batch[v]` the graph of node v, `mean_degree` per graph."""

    x: torch.Tensor
    edge_index: torch.Tensor
    batch: torch.Tensor
    mean_degree: torch.Tensor
    num_graphs: int

    def to(self, device) -> GraphBatch:
        return GraphBatch(
            self.x.to(device),
            self.edge_index.to(device),
            self.batch.to(device),
            self.mean_degree.to(device),
            self.num_graphs,
        )


def batch_graphs(graphs: list[tuple[torch.Tensor, torch.Tensor]]) -> GraphBatch:
    """[(x (n, f), edge_index (2, E))] -> one GraphBatch (edge indices offset per graph)."""
    xs, edges, batch, degrees, offset = [], [], [], [], 0
    for i, (x, edge_index) in enumerate(graphs):
        n = x.shape[0]
        xs.append(x.float())
        edges.append(edge_index.long() + offset)
        batch.append(torch.full((n,), i, dtype=torch.long))
        degrees.append(max(edge_index.shape[1] / max(n, 1), 1.0))
        offset += n
    return GraphBatch(
        torch.cat(xs),
        torch.cat(edges, 1),
        torch.cat(batch),
        torch.tensor(degrees, dtype=torch.float32),
        len(graphs),
    )


class GraphEncoder(nn.Module):
    """`layers` sum-aggregation GNN layers then max pooling: (GraphBatch) -> h (G, hidden)."""

    def __init__(self, in_dim: int, hidden: int, layers: int = 2):
        super().__init__()
        self.inp = nn.Linear(in_dim, hidden)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
            for _ in range(layers)
        )

    def forward(self, g: GraphBatch) -> torch.Tensor:
        h = torch.relu(self.inp(g.x))
        src, dst = g.edge_index
        scale = g.mean_degree[g.batch][:, None]
        for layer in self.layers:
            agg = torch.zeros_like(h).index_add_(0, dst, h[src]) / scale
            h = torch.relu(layer(torch.cat([h, agg], dim=-1)))
        pooled = torch.full((g.num_graphs, h.shape[1]), float("-inf"), device=h.device, dtype=h.dtype)
        pooled = pooled.scatter_reduce(0, g.batch[:, None].expand_as(h), h, reduce="amax", include_self=True)
        return torch.nan_to_num(pooled, neginf=0.0)
