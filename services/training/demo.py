"""`make demo` for training: plan a frozen-encoder multimodal model on 2 pipeline stages (profiled
costs, frozen-aware vs frozen-unaware partitions, CP split), then train it for a few steps on 2
worker processes over torch.distributed and compare the measured iteration time with the simulator."""

from __future__ import annotations

from pathlib import Path

from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE


def _done(client, job, label: str):
    done = follow(client, job.id, label)
    if PROTO_TO_STATE[done.state] != "SUCCEEDED":
        raise SystemExit(f"{label} ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
    return done


def run(client, out: Path) -> None:
    plan = _done(
        client,
        client.submit("training", "plan_parallelism", pattern="frozen_encoder", world_size=2, cp_size=4),
        "training.plan_parallelism",
    )
    r = plan.result
    console.print(
        "frozen-aware stages: "
        + " | ".join(f"{len(s['layers'])} layers" for s in r["stages"])
        + f"; predicted {r['predicted_iteration_time'] * 1e3:.1f} ms vs "
        + ", ".join(f"{m} {t * 1e3:.1f} ms" for m, t in r["baselines"].items())
    )
    console.print(
        f"CP split: {r['cp_mode']} (max/mean load "
        + ", ".join(f"{m} {v:.3f}" for m, v in r["cp_imbalance"].items())
        + ")"
    )
    train = _done(client, client.submit("training", "train", plan_job_id=plan.id, steps=10), "training.train")
    t = train.result
    console.print(
        f"2-process training: loss {t['losses'][0]:.3f} -> {t['losses'][-1]:.3f}; iteration measured "
        f"{t['measured_iteration_time'] * 1e3:.1f} ms, simulated {t['predicted_iteration_time'] * 1e3:.1f} ms"
    )
    paths = client.pull_artifacts(train.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths))
