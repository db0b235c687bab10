"""`make demo` for the router: train a MILD rejector on a 100:1 imbalanced mixture, then route."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from paperworks.router.v1 import router_pb2
from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.rpc.tensors import from_numpy
from paperworks.shared.sdk.client import Client


def run(client: Client, out: Path) -> None:
    job = client.submit(
        "router",
        "train_rejector",
        synthetic={"imbalance": 100, "seed": 0},
        loss="LOSS_MILD",
        n_train=1500,
        n_validation=1000,
        n_test=3000,
    )
    console.print(f"submitted [bold]{job.id}[/] (MILD vs two-stage CE, 4 agents, expert imbalance 100:1)")
    done = follow(client, job.id, "router.train_rejector")
    if PROTO_TO_STATE[done.state] != "SUCCEEDED":
        raise SystemExit(f"job ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
    paths = {p.name: p for p in client.pull_artifacts(job.id, out)}
    report = json.loads(paths["report.json"].read_text())
    for name, run_ in report["runs"].items():
        test = run_["test"]
        console.print(
            f"{name:>13}: balanced deferral loss {test['balanced_deferral_loss']:.3f}, "
            f"deferral loss {test['deferral_loss']:.3f}, minority-expert recall "
            f"{test['recall'][-1]:.2f}, coverage {test['coverage']:.2f}"
            + (f" (margin scale {run_['margin_scale']})" if name == "mild" else "")
        )
    features = from_numpy(np.zeros(8, dtype=np.float32))  # the mixture's default dimension
    reply = client.stub("router").Route(
        router_pb2.RouteRequest(policy_job_id=job.id, features=features), metadata=client.metadata, timeout=30
    )
    console.print(
        f"Route(x=0) -> {reply.agent} (scores "
        + ", ".join(f"{s.name} {s.score:.2f}" for s in reply.scores)
        + f"; decision {reply.decision_ms:.2f} ms)"
    )
    console.print(f"artifacts: {', '.join(sorted(paths))} in {out}")
