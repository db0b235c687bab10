"""The clip benchmark (RITA side): the attack x method table on seeds 1-3 with the full-size
tiny CLIP (800 steps of 128 pairs) and 64 views; per-image runtime of every method (the Classify
RPC's inline work) as a ratio to zero-shot; and the kernel library's batched Sinkhorn op against
POT's `ot.sinkhorn` on RITA's problem (8 classes x 64 views x 4 prompts), same process.

Writes tests/benchmarks/results/clip.json. `BENCH_CLIP_SEEDS` (e.g. "1") and `BENCH_CLIP_N`
(images per stream, default 100) shrink it.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import ot
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the experiment drivers live in tests/reproduction

from paperworks.kernels import ops  # noqa: E402
from paperworks.services.clip.rita import table  # noqa: E402
from reproduction.clip.rita_experiments import rita_table, trained_clip  # noqa: E402

RESULTS = HERE / "results"
SEEDS = tuple(int(x) for x in os.environ.get("BENCH_CLIP_SEEDS", "1,2,3").split(","))
N = int(os.environ.get("BENCH_CLIP_N", "100"))
METHODS = ["zero_shot", "ensemble", "tpt", "rtpt", "tda", "rita", "rita_no_cache"]


def sinkhorn_speed(reps: int = 20) -> dict:
    g = torch.Generator().manual_seed(0)
    cost = torch.rand(8, 64, 4, generator=g) * 2
    a, b = np.full(64, 1 / 64), np.full(4, 1 / 4)
    start = time.perf_counter()
    for _ in range(reps):
        ours = ops.sinkhorn(cost, epsilon=0.05, max_iter=100, tol=1e-5).cost
    t_ops = (time.perf_counter() - start) / reps
    start = time.perf_counter()
    for _ in range(reps):
        pot = [
            float(
                (
                    ot.sinkhorn(
                        a,
                        b,
                        c.numpy().astype(np.float64),
                        0.05,
                        numItermax=100,
                        stopThr=1e-5,
                        method="sinkhorn_log",
                    )
                    * c.numpy()
                ).sum()
            )
            for c in cost
        ]
    t_pot = (time.perf_counter() - start) / reps
    return {
        "ops_s": t_ops,
        "pot_s": t_pot,
        "speedup_vs_pot": t_pot / t_ops,
        "backend": ops.backend_for("sinkhorn"),
        "max_abs_diff": float(np.abs(ours.numpy() - pot).max()),
    }


def main() -> dict:
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    enc = trained_clip(800, 128, 0)
    out = {"platform": platform.platform(), "seeds": SEEDS, "n": N, "views": 64, "alpha": 1.0, "tables": {}}
    per_method = {m: [] for m in METHODS}
    for seed in SEEDS:
        _, rows = rita_table(enc, seed, N, eps_255=(0.0, 1.0, 4.0), methods=METHODS, views=64, alpha=1.0)
        out["tables"][seed] = rows
        print(f"seed {seed}\n{table(rows)}", flush=True)
        for r in rows:
            per_method[r["method"]].append(r["seconds_per_image"])
    base = float(np.mean(per_method["zero_shot"]))
    out["runtime"] = {
        m: {"seconds_per_image": float(np.mean(v)), "ratio_to_zero_shot": float(np.mean(v)) / base}
        for m, v in per_method.items()
    }
    out["sinkhorn"] = sinkhorn_speed()
    print(json.dumps({"runtime": out["runtime"], "sinkhorn": out["sinkhorn"]}, indent=1))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "clip.json").write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
