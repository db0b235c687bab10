"""`make demo` for the router: train a MILD rejector on a 100:1 imbalanced mixture and route with it;
then, from a folder of the client's own (no path shared with the server), upload a prompt set and a
small local LM (the folder as a .tar.gz), train an SDR decider on them, and route a prompt."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from paperworks.services.router.data.examples import write_examples
from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.values import tensor_from_lists


def _done(client: Client, job, title: str):
    done = follow(client, job.id, title)
    if PROTO_TO_STATE[done.state] != "SUCCEEDED":
        raise SystemExit(f"job ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
    return done


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
    _done(client, job, "router.train_rejector")
    paths = {p.name: p for p in client.pull_artifacts(job.id, out / "rejector")}
    report = json.loads(paths["report.json"].read_text())
    for name, run_ in report["runs"].items():
        test = run_["test"]
        console.print(
            f"{name:>17}: balanced deferral loss {test['balanced_deferral_loss']:.3f}, "
            f"deferral loss {test['deferral_loss']:.3f}, minority-expert recall "
            f"{test['recall'][-1]:.2f}, coverage {test['coverage']:.2f}"
            + (f" (margin scale {run_['margin_scale']})" if name == "mild" else "")
        )
    zeros = tensor_from_lists([0.0] * 8)  # a feature vector of the mixture's default dimension
    reply = client.call("router", "Route", timeout=30, policy_job_id=job.id, features=zeros)
    console.print(
        f"Route(x=0) -> {reply.agent} (scores "
        + ", ".join(f"{s.name} {s.score:.2f}" for s in reply.scores)
        + f"; decision {reply.decision_ms:.2f} ms)"
    )

    with tempfile.TemporaryDirectory(prefix="router-client-") as here:
        prompts, model, _ = write_examples(Path(here))
        prompt = json.loads(prompts.read_text().splitlines()[0])["prompt"]
        uploads = {"prompts": client.upload(prompts).artifact, "model": client.upload(model).artifact}
    for name, artifact in uploads.items():
        console.print(f"uploaded the {name} as {artifact.name} ({artifact.size_bytes} bytes)")
    job = client.submit(
        "router",
        "train_decider",
        local={"model": {"kind": "tiny", "source": {"upload": uploads["model"].sha256}}},
        prompts={"source": {"upload": uploads["prompts"].sha256}},
        remotes=[{"name": "big", "price": 1.0, "accuracy": [0.95]}],
        query_router_baseline=False,
    )
    console.print(f"submitted [bold]{job.id}[/] (SDR on your 60 prompts: the uploaded tiny LM vs a remote)")
    done = _done(client, job, "router.train_decider")
    client.pull_artifacts(job.id, out / "decider")
    areas = done.result["areas"]
    console.print("normalised cost-quality areas: " + ", ".join(f"{k} {v:.3f}" for k, v in areas.items()))
    reply = client.call("router", "Route", timeout=60, policy_job_id=job.id, text=prompt, budget=0.5)
    console.print(f"Route({prompt!r}, budget 0.5) -> {reply.agent} (local answer {reply.local_answer!r})")
    console.print(f"artifacts in {out}")
