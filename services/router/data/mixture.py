"""Synthetic input-expert mixtures with a controlled expert imbalance (the MILD setting in miniature).

Each agent j owns one Gaussian cluster of inputs on which it is accurate (`acc_own`) while every
other agent is mostly wrong (`acc_other`). The share of inputs drawn from agent j's cluster falls
geometrically from the base predictor (j = 0, the majority) to the last expert (the minority):
p_j ∝ imbalance^(-j / n), so the majority expert is the best one `imbalance` times more often
than the minority. Clusters overlap (`spread`), which is where imbalance bites: a rejector fit to
the imbalanced distribution hands the shared region to the majority. Not from any paper's code:
the design follows the paper's description of expert imbalance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from paperworks.services.router.mild.deferral import DeferralData


@dataclass(frozen=True)
class SyntheticMixture:
    n_experts: int = 3
    dim: int = 8
    imbalance: float = 100.0
    spread: float = 1.0
    separation: float = 2.5
    acc_own: float = 0.95
    acc_other: float = 0.05
    max_consultation_cost: float = 0.15
    seed: int = 0

    @property
    def n_agents(self) -> int:
        return self.n_experts + 1

    def proportions(self) -> np.ndarray:
        p = self.imbalance ** (-np.arange(self.n_agents) / self.n_experts)
        return p / p.sum()

    def centers(self) -> np.ndarray:
        """Cluster centres, fixed by `seed` alone so every split shares them."""
        rng = np.random.default_rng([self.seed, 0])
        raw = rng.normal(size=(self.n_agents, self.dim))
        return self.separation * raw / np.linalg.norm(raw, axis=1, keepdims=True)

    def sample(self, n: int, split_seed: int) -> DeferralData:
        rng = np.random.default_rng([self.seed, 1, split_seed])
        groups = rng.choice(self.n_agents, size=n, p=self.proportions())
        features = self.centers()[groups] + self.spread * rng.normal(size=(n, self.dim))
        own = groups[:, None] == np.arange(self.n_agents)[None, :]
        accuracy = np.where(own, self.acc_own, self.acc_other)
        errors = (rng.random((n, self.n_agents)) >= accuracy).astype(np.float64)
        beta = self.max_consultation_cost * np.arange(self.n_agents) / self.n_experts
        return DeferralData(
            features=features.astype(np.float32),
            errors=errors,
            alpha=np.ones(self.n_agents),
            beta=beta,
            agents=["base"] + [f"expert{j}" for j in range(1, self.n_agents)],
            groups=groups,
        )
