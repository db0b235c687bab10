"""SpatioLM (arXiv 2608.01899) in miniature: one base VLM pre-trained on general + spatial QA, then
the four arms of `spatiolm.train.ARMS` trained with the same spatial-QA pool, steps, batch size and
learning rate, and scored on the same held-out spatial and general items."""

from __future__ import annotations

import numpy as np
import torch
from paperworks.services.vlm.spatiolm import qa, train
from paperworks.services.vlm.spatiolm.model import SpatialConfig

CI = {
    "frames": 1,
    "pre_items": 2000,
    "spatial_items": 1500,
    "test_items": 400,
    "pre_steps": 500,
    "arm_steps": 200,
    "batch": 64,
    "pre_lr": 3e-3,
    "arm_lr": 1e-3,
    "d_model": 32,
}
# benchmark scale (tests/benchmarks/bench_vlm.py, seeds 1-3): a base pre-trained 4x longer on twice
# the items (at CI size it barely beats chance on general QA, so there is little for a branch to
# elicit) and twice the arm steps; chosen on validation seed 0 only.
BENCH = CI | {
    "pre_items": 4000,
    "pre_steps": 2000,
    "pre_lr": 1e-3,
    "arm_steps": 400,
}


def spatiolm(seed: int, settings: dict | None = None, device: str = "cpu", log=None) -> dict:
    s = CI | (settings or {})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster than two on a shared CPU
    try:
        return _run(seed, s, device, log)
    finally:
        torch.set_num_threads(threads)


def _run(seed: int, s: dict, device: str, log) -> dict:
    rng = np.random.default_rng(seed)
    f = s["frames"]
    pre = qa.sample(rng, s["pre_items"], qa.SPATIAL + qa.GENERAL, f)
    pool = qa.sample(rng, s["spatial_items"], qa.SPATIAL, f)
    test_s = qa.sample(rng, s["test_items"], qa.SPATIAL, f)
    test_g = qa.sample(rng, s["test_items"], qa.GENERAL, f)
    config = SpatialConfig(d_model=s["d_model"], heads=4, frames=f)
    base = train.pretrain(config, pre, s["pre_steps"], s["pre_lr"], s["batch"], seed, device)
    out = {}
    for arm in train.ARMS:
        model = train.train_arm(base, arm, pool, s["arm_steps"], s["arm_lr"], s["batch"], seed, device)
        out[arm] = train.evaluate(model, test_s, test_g, device)
        if log is not None:
            log(arm, out[arm])
    # the depth head's baseline: the training pool's per-pixel mean depth for every test frame
    mean = train.half(pool.depth).mean(0, keepdims=True)
    out["depth_baseline_abs_rel"] = train.abs_rel(
        np.broadcast_to(mean, train.half(test_s.depth).shape), test_s.depth
    )
    return out


if __name__ == "__main__":
    import json
    import sys
    import time

    t = time.time()
    seed = int(sys.argv[1])

    def log(arm, r):
        print(
            arm,
            round(time.time() - t),
            {k: round(v, 3) for k, v in r.items() if isinstance(v, float)},
            r["spatial"],
            r["general"],
            flush=True,
        )

    out = spatiolm(seed, json.loads(sys.argv[2]) if len(sys.argv) > 2 else None, log=log)
    print("depth_baseline_abs_rel", round(out["depth_baseline_abs_rel"], 3))
    print("seconds", round(time.time() - t, 1))
