"""The Cornstarch reproductions at benchmark size (tests/reproduction/training/experiments.py):

(a) CP balance: max/mean rank load of uniform / zigzag / LPT splits, 64 synthetic 8k-token sequences
    (seeds 1000..1063), cp in {2, 4, 8}, multimodal and causal-only;
(b) per freezing pattern, the frozen-aware partition vs the frozen-unaware ones (parameters, layers,
    3x forward): each plan's iteration time MEASURED on 2 processes (torch.distributed, gloo, CPU;
    median and min of steps 3..N; the plans stepped round-robin in one launch), the ratios
    printed, and the simulator's prediction error against each measurement;
(c) the loss curve of 2-process training under three partitions vs single-process, and CP ring
    attention under every split vs unsplit attention.

Writes tests/benchmarks/results/training.json. Noisy on a shared 2-core box: rerun and compare.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from reproduction.training import experiments  # noqa: E402

RESULTS = HERE / "results"
PATTERNS = ("all_trainable", "frozen_encoder", "projector_only", "frozen_llm_lora")


def main() -> dict:
    t0 = time.time()
    out = {
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor(),
            "note": "CPU, 2 cores shared; gloo; 1 intra-op thread per process",
        }
    }
    out["a_cp_balance"] = experiments.cp_balance(range(1000, 1064))
    out["b_partitions"] = experiments.partition_study(
        patterns=PATTERNS, world=2, m=4, batch_size=16, repeats=9, measure=True, steps=12
    )
    out["c_same_model"] = experiments.same_model(experiments.STUDY, "frozen_encoder", [4, 9, 12], steps=8)
    out["seconds"] = time.time() - t0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "training.json").write_text(json.dumps(out, indent=1))
    print("(a) max/mean rank load (mean over 64 sequences)")
    for key, row in out["a_cp_balance"].items():
        if isinstance(row, dict):
            print(f"  {key:15s} " + "  ".join(f"{m} {v:.3f}" for m, v in row.items()))
    print("(b) iteration time, frozen-unaware / frozen-aware: measured median (min) | predicted; sim error")
    for pattern, row in out["b_partitions"].items():
        for meth, r in row.items():
            print(
                f"  {pattern:16s} {meth:13s} stages {r['stages']}  measured {r['measured'] * 1e3:7.1f} ms "
                f"ratio {r['measured_ratio']:.3f} ({r['measured_min_ratio']:.3f}) | predicted "
                f"{r['predicted'] * 1e3:7.1f} ms ratio {r['predicted_ratio']:.3f}  "
                f"sim error {r['sim_error']:+.1%}  replay error {r['replay_error']:+.1%}"
            )
    c = out["c_same_model"]
    gap = max(
        abs(a - b) for losses in c["pipelines"].values() for a, b in zip(losses, c["reference"], strict=True)
    )
    print(
        f"(c) max |pipeline loss - single-process loss| over partitions and steps: {gap:.2e}; "
        f"CP max abs error {max(c['cp_max_abs_error'].values()):.1e}"
    )
    return out


if __name__ == "__main__":
    main()
