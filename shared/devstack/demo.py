"""`make demo`: bring up the embedded stack, run each service's main job end to end,
print the results.

Uses only what a user has: the stack launcher and the SDK. The stack lives in
a fresh state folder and is stopped afterwards, whatever happens. Each service
contributes `services/<name>/demo.py` with `run(client, out)`; `ops` goes first
as the platform's own smoke check. `python -m paperworks.shared.devstack.demo router`
runs only the services named.
"""
from __future__ import annotations

import importlib
import os
import sys
import tempfile
from pathlib import Path

from paperworks.shared.config import Settings
from paperworks.shared.devstack.stack import EmbeddedStack
from paperworks.shared.registry import services
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

console = Console()


def follow(client: Client, job_id: str, title: str):
    with Progress(TextColumn(title), BarColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(title, total=1.0, info="queued")
        for ev in client.watch(job_id, timeout=1800):
            if ev.HasField("progress"):
                bar.update(task, completed=ev.progress.fraction, info=ev.progress.message)
            else:
                bar.update(task, info=PROTO_TO_STATE[ev.state].lower())
    return client.get(job_id)


def demo_runner(name: str):
    module = f"paperworks.services.{name}.demo"
    try:
        return importlib.import_module(module).run
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None


def main(names: list[str]) -> None:
    unknown = sorted(set(names) - set(services()))
    if unknown:
        raise SystemExit(f"unknown service(s): {', '.join(unknown)} (known: {', '.join(services())})")
    names = sorted(names or services(), key=lambda n: n != "ops")  # ops first: the smoke check
    runners = {n: demo_runner(n) for n in names}
    runners = {n: r for n, r in runners.items() if r is not None}
    with tempfile.TemporaryDirectory(prefix="paperworks-demo-") as tmp:
        settings = Settings(state_dir=Path(tmp) / "state")
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PAPERWORKS_")}
        environ["PAPERWORKS_STATE_DIR"] = str(settings.state_dir)
        environ["PAPERWORKS_DATA_ROOT"] = tmp  # the demos' own inputs, nothing else on this machine
        stack = EmbeddedStack(settings, list(runners), environ=environ)
        with console.status("starting the embedded stack (Kafka, Redis, SQLite, services)"):
            state = stack.up()
        console.print("stack up: " + ", ".join(f"{n} on :{s['port']}" for n, s in state.services.items()))
        try:
            with Client(endpoints=stack.endpoints, token=state.token) as client:
                for name, run in runners.items():
                    console.rule(name)
                    run(client, Path(tmp) / "artifacts" / name)
        finally:
            stack.down()
            console.print("stack stopped")


if __name__ == "__main__":
    main(sys.argv[1:])
