"""The DPSL reproduction over seeds 7, 8, 9 (mean ± sample s.d.), with every peer arm trained in the
same run on the same upcycled model and batches: Switch load balancing (LB), router z-loss,
aux-loss-free bias, Drop-Upcycling (r = 0.5) + LB, DPSL symmetric (alpha 0.25, 0.5, 1.0), DPSL
warm-up-only (first 50 steps), DPSL per-modality. Also the per-step cost of DPSL relative to LB
(a ratio measured in this process). Writes tests/benchmarks/results/moe.json.
`BENCH_MOE_SEEDS` (e.g. "7") shrinks it.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the experiment drivers live in tests/reproduction

from paperworks.services.moe.dpsl.losses import RouterTerm  # noqa: E402
from reproduction.moe import dpsl_experiments as ex  # noqa: E402

RESULTS = HERE / "results"
SEEDS = tuple(int(x) for x in os.environ.get("BENCH_MOE_SEEDS", "7,8,9").split(","))
ARMS = ex.ARMS | {
    "z_loss": [RouterTerm("z_loss", 0.001)],
    "aux_free_bias": [RouterTerm("aux_free_bias", rate=1e-3)],
    "dpsl_0.5": [RouterTerm("dpsl", 1.0, alpha=[0.5])],
    "dpsl_1.0": [RouterTerm("dpsl", 1.0, alpha=[1.0])],
    "dpsl_warmup_50": [RouterTerm("dpsl", 1.0, alpha=[0.25], warmup_steps=50)],
}
KEYS = ("accuracy", "confidence", "entropy", "max_mean_load", "mutual_information")


def main() -> None:
    runs, timing = [], {}
    for seed in SEEDS:
        started = time.perf_counter()
        runs.append({"seed": seed, **ex.dpsl_arms(seed, ARMS)})
        print(f"seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    for name in ("load_balance", "dpsl_symmetric"):
        t = time.perf_counter()
        ex.dpsl_arms(SEEDS[0], {name: ARMS[name]}, dense_steps=1, steps=100, eval_n=100)
        timing[name] = time.perf_counter() - t
    table = {
        arm: {
            k: (
                float(np.mean([r[arm][k] for r in runs])),
                float(np.std([r[arm][k] for r in runs], ddof=1)) if len(runs) > 1 else 0.0,
            )
            for k in KEYS
        }
        for arm in ARMS
    }
    print(f"{'arm':<18}" + "".join(f"{k:>22}" for k in KEYS))
    for arm, row in table.items():
        print(f"{arm:<18}" + "".join(f"{m:>14.3f} ± {s:<5.3f}" for m, s in row.values()))
    ratio = timing["dpsl_symmetric"] / timing["load_balance"]
    print(f"wall ratio DPSL / LB for 100 training steps (incl. setup): {ratio:.2f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "moe.json").write_text(
        json.dumps(
            {
                "seeds": SEEDS,
                "machine": platform.machine(),
                "table": table,
                "runs": runs,
                "dpsl_over_lb_wall_ratio": ratio,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
