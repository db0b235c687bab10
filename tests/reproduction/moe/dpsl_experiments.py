"""The DPSL reproduction driver: a dense 2-block transformer trained on the synthetic two-modality
stream, upcycled to 4 experts (top-2), then one copy per arm trained for the same steps on the same
batches (same seed) with only the router-loss mix differing; every arm is measured on the same
held-out sequences. Settings (alpha = 0.25, the asymmetric prior (2, 2, 0.05, 0.05) / mirrored,
DPSL weight 1, LB weight 0.01, router learning rate 1e-2, 200 steps) were chosen on validation
seeds 100 and 101."""

from __future__ import annotations

import numpy as np
import torch
from paperworks.services.moe.dpsl import train
from paperworks.services.moe.dpsl.losses import DPSL, RouterTerm
from paperworks.services.moe.dpsl.model import ModelConfig, clone, upcycle
from paperworks.services.moe.dpsl.world import World

SYMMETRIC = [0.25]
ASYMMETRIC = [[2.0, 2.0, 0.05, 0.05], [0.05, 0.05, 2.0, 2.0]]
ARMS = {
    "load_balance": [RouterTerm("load_balance", 0.01)],
    "dpsl_symmetric": [RouterTerm("dpsl", 1.0, alpha=SYMMETRIC)],
    "dpsl_asymmetric": [RouterTerm("dpsl", 1.0, per_modality=ASYMMETRIC)],
}


def prior_fit(alpha=SYMMETRIC * 4, n: int = 4096, seed: int = 0) -> float:
    """DPSL of samples drawn from the prior itself (should be ~0)."""
    torch.manual_seed(seed)
    p = torch.distributions.Dirichlet(torch.tensor(alpha, dtype=torch.float64)).sample((n,))
    return float(DPSL(alpha)(p)[0])


def dpsl_arms(
    seed: int, arms=ARMS, dense_steps: int = 300, steps: int = 200, eval_n: int = 2000, log=None
) -> dict:
    torch.set_num_threads(min(2, torch.get_num_threads()))
    world = World(seed)
    dense = train.build_dense(ModelConfig(), seed)
    train.fit(dense, world, dense_steps, 64, 3e-3, seed)
    test = world.sample(np.random.default_rng(seed + 10**6), eval_n)
    base = upcycle(dense, 4, 2, seed=seed)
    out = {"dense": train.evaluate(dense, test), "upcycled": _strip(train.evaluate(base, test))}
    for name, terms in arms.items():
        model = clone(base)
        train.fit(
            model, world, steps, 64, 1e-3, seed + 1, terms=terms, router_learning_rate=1e-2, track_every=0
        )
        out[name] = _strip(train.evaluate(model, test))
        if log is not None:
            log(seed, name, out[name])
    return out


def _strip(r: dict) -> dict:
    return {k: v for k, v in r.items() if k != "layers"}


if __name__ == "__main__":
    import json
    import sys

    for s in map(int, sys.argv[1:] or ["7"]):
        print(s, json.dumps(dpsl_arms(s, log=lambda *a: print(*a, flush=True)), indent=1), flush=True)
