"""Training the two-stage rejector with the CE surrogate or MILD, and choosing MILD's margin scale.

The rejector is a small MLP over standardised input features (an input embedding, or any
features the user logged). `fit_rejector` minimises `deferral.deferral_surrogate` with AdamW on
full batches (deferral datasets here are small; full batches make runs exactly repeatable), on the
`device` it is given: the data, the stacked parameters and the returned rejectors live there, and
`choose` moves each batch to its rejector's device. Float32 throughout (no bf16 autocast): the
modules are a few thousand parameters, and the validation search compares losses that differ in
the third decimal.
`fit_mild` trains one rejector per candidate margin scale s and keeps the one with the lowest
expert-balanced deferral loss on the validation split (MILD's "margin scale chosen on a
validation split"); s = 0 is among the candidates and is exactly the CE baseline.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from paperworks.services.router.mild.deferral import (
    DeferralData,
    agent_costs,
    best_frequencies,
    deferral_surrogate,
    expert_margins,
    logit_adjustments,
)
from paperworks.services.router.mild.metrics import balanced_deferral_loss
from torch import nn

DEFAULT_SCALES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 4.0)
# The logit-adjusted CE baseline's tau grid: as many candidates as MILD's scales; tau = 0 is CE and
# tau = 1 is Menon et al.'s default for the balanced error. The surrogate's targets are soft (cost
# weights), so the score gaps between agents are small and useful taus are well below 1: a first grid
# of 0.1..3 picked tau = 0 at 100:1 on every validation seed (even 0.1 shifts the rarest agent by ~0.5).
DEFAULT_TAUS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.0)
# Full-batch AdamW steps for every arm (CE, logit-adjusted CE, MILD): the budget the validation
# curves on validation seeds chose (tests/benchmarks/bench_router.py `budget_curves`, same rule per arm).
DEFAULT_STEPS = 800


@dataclass(frozen=True)
class RejectorConfig:
    hidden: int = 16
    steps: int = DEFAULT_STEPS
    lr: float = 0.03
    weight_decay: float = 0.1
    gamma: float = 0.5
    seed: int = 0


class Rejector(nn.Module):
    """r(x) in R^{n+1}; standardisation is part of the module so a policy is self-contained."""

    def __init__(self, dim: int, n_agents: int, hidden: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))
        layers: list[nn.Module] = [nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, n_agents)]
        self.net = nn.Sequential(*layers) if hidden > 0 else nn.Linear(dim, n_agents)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)

    @torch.no_grad()
    def scores(self, features: np.ndarray) -> np.ndarray:
        """r(x) of a batch, computed on the rejector's device."""
        return self(torch.as_tensor(features, dtype=torch.float32, device=self.mean.device)).cpu().numpy()

    def choose(self, features: np.ndarray) -> np.ndarray:
        return self.scores(features).argmax(axis=1)


@dataclass
class FittedRejector:
    module: Rejector
    loss: str
    margins: list[float]
    scale: float
    selection: list[dict] = field(default_factory=list)  # validation score per candidate scale

    def choose(self, features: np.ndarray) -> np.ndarray:
        return self.module.choose(features)


def costs_of(data: DeferralData) -> np.ndarray:
    return agent_costs(data.errors, data.alpha, data.beta)


def fit_rejector(
    data: DeferralData, config: RejectorConfig, margins: np.ndarray | None = None, device: str = "cpu"
) -> Rejector:
    """Minimise the two-stage surrogate (with `margins`, MILD's; without, the CE baseline)."""
    return fit_rejectors(data, config, None if margins is None else np.asarray(margins)[None, :],
                         device=device)[0]


def fit_rejectors(
    data: DeferralData,
    config: RejectorConfig,
    margins: np.ndarray | None,
    adjustments: np.ndarray | None = None,
    device: str = "cpu",
) -> list[Rejector]:
    """See `fit_rejector_snapshots`; the rejectors after `config.steps` steps."""
    return fit_rejector_snapshots(data, config, margins, adjustments, (config.steps,), device)[config.steps]


def fit_rejector_snapshots(
    data: DeferralData,
    config: RejectorConfig,
    margins: np.ndarray | None,
    adjustments: np.ndarray | None = None,
    snapshots: Sequence[int] = (),
    device: str = "cpu",
) -> dict[int, list[Rejector]]:
    """Train K rejectors side by side, one per row of `margins` [K, A] (None: one CE rejector),
    or of `adjustments` [K, A] (the logit-adjusted baseline; give one of the two).

    Each starts from the same seeded initialisation and sees the same full batches; their
    parameters are stacked and their losses summed, so every rejector follows exactly the AdamW
    trajectory it would follow alone (AdamW is elementwise) while the per-step overhead that
    dominates at this size is paid once; MILD's whole validation search costs a few fits.
    `snapshots`: the step counts to return the rejectors at (full batches and a constant learning
    rate, so the snapshot at s steps is exactly an s-step fit): one run draws a validation curve.
    Everything is trained on `device`; the initialisation is drawn on the CPU, so the seed gives
    the same start on every device."""
    host = torch.as_tensor(data.features, dtype=torch.float32)
    x = host.to(device)
    costs = torch.as_tensor(costs_of(data), dtype=torch.float32, device=device)
    assert margins is None or adjustments is None
    stacked = margins if margins is not None else adjustments
    k = 1 if stacked is None else len(stacked)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        template = Rejector(x.shape[1], costs.shape[1], config.hidden).to(device)
    template.mean.copy_(x.mean(dim=0))
    template.std.copy_(x.std(dim=0).clamp_min(1e-6))
    # Stacked copies of each linear layer: weights [K, in, out], biases [K, 1, out].
    params = []
    for linear in _linears(template):
        params.append(nn.Parameter(linear.weight.detach().T.repeat(k, 1, 1).clone()))
        params.append(nn.Parameter(linear.bias.detach().repeat(k, 1, 1).clone()))
    delta = None if margins is None else torch.as_tensor(margins, dtype=torch.float32, device=device)
    shift = None if adjustments is None else torch.as_tensor(adjustments, dtype=torch.float32, device=device)
    # Logged inputs repeat (text prompts are drawn from a pool), so the first layer runs on the
    # distinct rows only and is gathered back: the same numbers for a fraction of the compute.
    # (Found once on the host: the rows are the logged data, already there.)
    distinct, inverse = torch.unique(host, dim=0, return_inverse=True)
    if len(distinct) > 0.8 * len(x):  # not worth the gather (its backward is a scatter-add)
        distinct, inverse = x, None
    else:
        distinct, inverse = distinct.to(device), inverse.to(device)
    z = ((distinct - template.mean) / template.std).expand(k, *distinct.shape).contiguous()
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)

    def export() -> list[Rejector]:
        out = []
        for j in range(k):
            module = copy.deepcopy(template)
            with torch.no_grad():
                for n, linear in enumerate(_linears(module)):
                    linear.weight.copy_(params[2 * n][j].T)
                    linear.bias.copy_(params[2 * n + 1][j, 0])
            out.append(module.eval())
        return out

    taken = {s: export() for s in snapshots if s == 0}
    for step in range(1, max(snapshots, default=0) + 1):
        h = z
        for i in range(0, len(params), 2):
            h = torch.baddbmm(params[i + 1], h, params[i])
            if i == 0 and inverse is not None:
                h = h[:, inverse]
            if i + 2 < len(params):
                h = torch.relu(h)
        loss = deferral_surrogate(h, costs, delta, shift)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step in snapshots:
            taken[step] = export()
    return taken


def _linears(module: Rejector) -> list[nn.Linear]:
    return [m for m in module.net.modules() if isinstance(m, nn.Linear)]


def fit_two_stage_ce(data: DeferralData, config: RejectorConfig, device: str = "cpu") -> FittedRejector:
    module = fit_rejector(data, config, device=device)
    return FittedRejector(module, "two_stage_ce", [0.0] * data.errors.shape[1], 0.0)


def mild_margins(train: DeferralData, scales: Sequence[float], gamma: float) -> np.ndarray:
    frequencies = best_frequencies(costs_of(train))
    return np.stack([expert_margins(frequencies, scale, gamma) for scale in scales])


def tau_adjustments(train: DeferralData, taus: Sequence[float]) -> np.ndarray:
    frequencies = best_frequencies(costs_of(train))
    return np.stack([logit_adjustments(frequencies, tau) for tau in taus])


def fit_mild(
    train: DeferralData,
    validation: DeferralData,
    config: RejectorConfig,
    scales: Sequence[float] = DEFAULT_SCALES,
    on_candidate: Callable[[int, int], None] | None = None,
    modules: list[Rejector] | None = None,
    device: str = "cpu",
) -> FittedRejector:
    """One rejector per margin scale (trained side by side; or the given `modules`, one per scale);
    keep the lowest validation expert-balanced deferral loss (ties go to the smaller scale, listed
    first)."""
    val_costs = costs_of(validation)
    margins = mild_margins(train, scales, config.gamma)
    modules = modules if modules is not None else fit_rejectors(train, config, margins, device=device)
    best: FittedRejector | None = None
    best_score = np.inf
    selection = []
    for i, (scale, module) in enumerate(zip(scales, modules, strict=True)):
        score = balanced_deferral_loss(module.choose(validation.features), val_costs)
        selection.append({"scale": float(scale), "val_balanced_deferral_loss": score})
        if score < best_score - 1e-12:
            best_score = score
            best = FittedRejector(module, "mild", margins[i].tolist(), float(scale))
        if on_candidate is not None:
            on_candidate(i + 1, len(scales))
    assert best is not None
    best.selection = selection
    return best


def fit_logit_adjusted(
    train: DeferralData,
    validation: DeferralData,
    config: RejectorConfig,
    taus: Sequence[float] = DEFAULT_TAUS,
    modules: list[Rejector] | None = None,
    device: str = "cpu",
) -> FittedRejector:
    """The logit-adjusted CE baseline (Menon et al. 2021) tuned exactly like MILD: one rejector per
    tau (side by side, the same budget; or the given `modules`), the lowest validation
    expert-balanced deferral loss kept (tau = 0, plain CE, is a candidate). `scale` records tau."""
    val_costs = costs_of(validation)
    shifts = tau_adjustments(train, taus)
    modules = modules if modules is not None else fit_rejectors(train, config, None, shifts, device)
    scores = [balanced_deferral_loss(m.choose(validation.features), val_costs) for m in modules]
    i = int(np.argmin(scores))  # ties go to the smaller tau, listed first
    fitted = FittedRejector(modules[i], "logit_adjusted_ce", shifts[i].tolist(), float(taus[i]))
    fitted.selection = [
        {"tau": float(t), "val_balanced_deferral_loss": v} for t, v in zip(taus, scores, strict=True)
    ]
    return fitted


def coverage_curve(module: Rejector, data: DeferralData, points: int = 33) -> list[dict]:
    """Coverage vs system accuracy as a constant is added to the base predictor's score: the
    accuracy-coverage trade-off of one trained rejector. Offsets are quantiles of the gap between
    the best expert's score and the base's, so coverage steps evenly from 0 to 1; offset 0 (the
    trained rejector) is included."""
    scores = module.scores(data.features)
    gap = scores[:, 1:].max(axis=1) - scores[:, 0]
    offsets = np.unique(
        np.concatenate([[gap.min() - 1.0], np.quantile(gap, np.linspace(0, 1, points)) + 1e-6, [0.0]])
    )
    rows = np.arange(len(data))
    curve = []
    for offset in offsets:
        shifted = scores.copy()
        shifted[:, 0] += offset
        choice = shifted.argmax(axis=1)
        curve.append(
            {
                "offset": float(offset),
                "coverage": float((choice == 0).mean()),
                "system_accuracy": float(1 - data.errors[rows, choice].mean()),
            }
        )
    return curve

