"""`make demo` for pipeline: the shipped example pipelines (examples/pipelines/*.yaml) at their small
size, each one job of the pipeline service whose steps run on the other services; a pipeline whose
services this stack does not run is skipped and said so. The upcycle example's dense base is a tiny
random Llama written here (`paperworks.services.moe.data llama`)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pipelines"
ORDER = ("denoise-segment.yaml", "clip-robustness.yaml", "upcycle-quantize-route.yaml")


def example_steps(name: str, out: Path) -> list[dict]:
    import yaml

    steps = yaml.safe_load((EXAMPLES / name).read_text())["steps"]
    for step in steps:
        base = step["params"].get("base")
        if step["service"] == "moe" and isinstance(base, dict) and base.get("path") == "./llama":
            # the command the example's comment gives (a service never imports another's code)
            command = [sys.executable, "-m", "paperworks.services.moe.data", "llama", str(out / "llama")]
            subprocess.run(command, check=True, capture_output=True)
            base["path"] = str(out / "llama")
    return steps


def run(client, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in ORDER:
        if not (EXAMPLES / name).exists():
            continue
        steps = example_steps(name, out)
        missing = sorted({s["service"] for s in steps} - set(client.endpoints))
        if missing:
            console.print(f"{name}: skipped (this stack does not run {', '.join(missing)})")
            continue
        job = client.run_pipeline(steps)
        console.print(f"{name}: pipeline [bold]{job.id}[/], steps "
                      + " -> ".join(client.validate_pipeline(steps)))
        done = follow(client, job.id, f"pipeline {name}")
        if PROTO_TO_STATE[done.state] != "SUCCEEDED":
            raise SystemExit(f"{name} ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
        result = MessageToDict(done.result)
        for step in result["order"]:
            info = result["steps"][step]
            models = info["outputs"].get("models", [])
            console.print(f"  {step:<20} {info['job_id']}  {info['state'].lower()}"
                          + (f"  announced {', '.join(models)}" if models else ""))
        picture = next(a for a in done.artifacts if a.name == "dag.png")
        path = client.pull_artifact(job.id, picture.sha256, out / name.removesuffix(".yaml"))
        console.print(f"  DAG picture: {path}")
