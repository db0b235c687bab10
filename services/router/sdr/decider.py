"""The SDR decision module: one quality head per option, one decision rule for every cost weight.

Selective Deferred Routing (ICML 2026): options are o = 0 (accept the local answer) and o = 1..m
(send the request to remote model o). A lightweight MLP over the request's features predicts
each option's quality q_o(x) in [0, 1] (sigmoid heads on a shared trunk, trained with binary
cross-entropy against observed qualities, which may be fractional). The decision is

    o*(x; lambda) = argmax_o  q_o(x) - lambda * cost_o,

so one trained module serves every cost preference: sweeping lambda traces the cost-quality
curve with no retraining, and a request carries at most one remote call (o* is a single option).
A budget (mean cost per request) is turned into the lambda whose validation mean cost fits it
with the highest validation quality.

Design choices (not from the paper): trunk width, steps and the lambda grid; and the input
transform. Features are standardised, then each hidden-state block (prompt last token, prompt
mean, answer mean) is replaced by its top `components` principal components (whitened, fitted on
the training traces) while scalar features (entropy, NLL, length) pass through. With ~1k traces
and a tiny LM, raw 64-d blocks let the module memorise prompt identity instead of the model's
confidence; a handful of components keeps what generalises to unseen requests.

The module trains and predicts on the `device` it is given (features moved there, predictions
back to the CPU), in float32: it is a few thousand parameters, and bf16 would only blur the
quality estimates the lambda sweep ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from paperworks.services.router.sdr.traces import Traces
from torch import nn


@dataclass(frozen=True)
class DeciderConfig:
    hidden: int = 16
    steps: int = 300
    lr: float = 3e-3
    weight_decay: float = 0.1
    components: int = 4
    seed: int = 0


def fit_projection(
    features: np.ndarray, blocks: Sequence[tuple[int, int]], components: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, std, W): z = ((x - mean) / std) @ W keeps `components` whitened principal
    components of each [start, stop) block and every column outside the blocks."""
    mean, std = features.mean(axis=0), features.std(axis=0) + 1e-4
    z = (features - mean) / std
    inside = np.zeros(features.shape[1], dtype=bool)
    columns = []
    for start, stop in blocks:
        inside[start:stop] = True
        block = z[:, start:stop] - z[:, start:stop].mean(axis=0)
        _, singular, vt = np.linalg.svd(block, full_matrices=False)
        k = min(components, len(singular))
        w = np.zeros((features.shape[1], k))
        w[start:stop] = vt[:k].T * (np.sqrt(len(z)) / np.maximum(singular[:k], 1e-6))
        columns.append(w)
    for j in np.flatnonzero(~inside):
        e = np.zeros((features.shape[1], 1))
        e[j] = 1.0
        columns.append(e)
    return mean, std, np.concatenate(columns, axis=1)


class QualityHeads(nn.Module):
    def __init__(self, dim: int, projected: int, n_options: int, hidden: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))
        self.register_buffer("projection", torch.zeros(dim, projected))
        self.trunk = nn.Sequential(nn.Linear(projected, hidden), nn.ReLU())
        self.heads = nn.Linear(hidden, n_options)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Standardised features through the fixed projection (nothing here is trained)."""
        return ((x - self.mean) / self.std) @ self.projection

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of each option's quality, [N, n_options]."""
        return self.heads(self.trunk(self.project(x)))

    @torch.no_grad()
    def predict(self, features: np.ndarray) -> np.ndarray:
        """Predicted qualities [N, n_options], computed on the module's device."""
        x = torch.as_tensor(features, dtype=torch.float32, device=self.mean.device)
        return torch.sigmoid(self(x)).cpu().numpy()


def fit_decider(
    features: np.ndarray,
    qualities: np.ndarray,
    config: DeciderConfig,
    blocks: Sequence[tuple[int, int]] = (),
    device: str = "cpu",
) -> QualityHeads:
    """Train the quality heads on `device`; `blocks` are the hidden-state column ranges to compress."""
    mean, std, projection = fit_projection(features, blocks, config.components)
    x = torch.as_tensor(features, dtype=torch.float32, device=device)
    y = torch.as_tensor(qualities, dtype=torch.float32, device=device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        module = QualityHeads(x.shape[1], projection.shape[1], y.shape[1], config.hidden).to(device)
    module.mean.copy_(torch.as_tensor(mean))
    module.std.copy_(torch.as_tensor(std))
    module.projection.copy_(torch.as_tensor(projection))
    optimizer = torch.optim.AdamW(module.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    loss_fn = nn.BCEWithLogitsLoss()
    module.train()
    with torch.no_grad():  # the projection is fixed: apply it once, not every step
        z = module.project(x)
    for _ in range(config.steps):
        loss = loss_fn(module.heads(module.trunk(z)), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return module.eval()


def decide(predicted: np.ndarray, costs: np.ndarray, lam: float) -> np.ndarray:
    """argmax_o q_o - lambda * cost_o per row (ties: the cheaper, lower-index option)."""
    return np.argmax(predicted - lam * costs[None, :], axis=1)


def lambda_grid(costs: np.ndarray, n: int = 41) -> np.ndarray:
    """0, then geometric from 'prices barely matter' to 'no remote is ever worth it'."""
    positive = costs[costs > 0]
    if positive.size == 0:
        return np.zeros(1)
    low, high = 1e-3 / positive.max(), 2.0 / positive.min()
    return np.concatenate([[0.0], np.geomspace(low, high, n - 1)])


@dataclass(frozen=True)
class OperatingPoint:
    lam: float
    cost: float
    quality: float
    accept_rate: float

    def to_dict(self) -> dict:
        return {
            "lambda": self.lam,
            "cost": self.cost,
            "quality": self.quality,
            "accept_rate": self.accept_rate,
        }


def evaluate_choice(choice: np.ndarray, qualities: np.ndarray, costs: np.ndarray, lam: float = 0.0):
    rows = np.arange(len(choice))
    return OperatingPoint(
        float(lam),
        float(costs[choice].mean()),
        float(qualities[rows, choice].mean()),
        float((choice == 0).mean()),
    )


def sweep(
    predicted: np.ndarray, qualities: np.ndarray, costs: np.ndarray, lambdas: Sequence[float]
) -> list[OperatingPoint]:
    """The cost-quality curve of one trained module: one operating point per lambda."""
    return [evaluate_choice(decide(predicted, costs, lam), qualities, costs, lam) for lam in lambdas]


def lambda_for_budget(points: Sequence[OperatingPoint], budget: float) -> float:
    """The lambda whose (validation) mean cost is within `budget` with the best quality; the
    largest lambda (cheapest policy) when none fits."""
    fitting = [p for p in points if p.cost <= budget + 1e-12]
    if not fitting:
        return max(p.lam for p in points)
    return max(fitting, key=lambda p: (p.quality, p.lam)).lam


@dataclass
class SDRFit:
    """A trained decision module, its lambda grid and validation curve, and the default lambda."""

    module: QualityHeads
    lambdas: np.ndarray
    validation_curve: list[OperatingPoint]
    default_lambda: float


def fit_sdr(
    train: Traces, validation: Traces, costs: np.ndarray, config: DeciderConfig, device: str = "cpu"
) -> SDRFit:
    """The module fitted on training traces (on `device`); its curve over `lambda_grid` on
    validation traces."""
    module = fit_decider(train.local.features, train.qualities, config, train.local.layout.blocks(), device)
    lambdas = lambda_grid(costs)
    val_points = sweep(module.predict(validation.local.features), validation.qualities, costs, lambdas)
    # Default preference: the knee, the point with the best quality - cost / c_max trade-off.
    c_max = costs.max()
    knee = max(val_points, key=lambda p: p.quality - p.cost / c_max)
    return SDRFit(module, lambdas, val_points, knee.lam)
