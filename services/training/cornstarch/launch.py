"""A torchrun-like launcher: starts `world` worker processes (`python -m ...cornstarch.worker`) with
a rendezvous on 127.0.0.1 and a free port, polls them, and reaps them all — on success, on a worker's
failure, on a timeout, or when `poll` raises (a cancelled job) — so no process outlives the call.

Each child gets its own session (process group) and is killed as a group, and dies with its
launcher (PR_SET_PDEATHSIG) if that is killed outright; results travel as one
`rank<r>.pt` file per rank in a temporary folder."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


class WorkerFailed(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGKILL it when the launching process dies, so a worker
    killed outright (not only a cancelled job) leaves no orphans."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill(procs) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()


def step_records(folder: Path, world: int) -> list[dict | None]:
    """Each rank's latest step record (`worker.PipelineTask`), None where it has none yet."""
    records = []
    for rank in range(world):
        try:
            records.append(json.loads((folder / f"step-rank{rank}.json").read_text()))
        except (OSError, ValueError):
            records.append(None)
    return records


def launch(
    task: dict, world: int, poll=None, timeout: float = 600.0, device: str = "cpu", on_start=None
) -> list[dict]:
    """Run `task` (see `worker.main`) on `world` processes; returns each rank's result dict.
    `poll(records)` is called about every 50 ms while they run with each rank's latest step record
    (`step_records`; it may raise to cancel); `on_start(pids)` is told the process ids."""
    with tempfile.TemporaryDirectory(prefix="cornstarch-") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "task.json").write_text(json.dumps({**task, "device": device}))
        port = free_port()
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "WORLD_SIZE": str(world),
            "PYTHONSAFEPATH": "1",
            "OMP_NUM_THREADS": "1",
        }
        procs = []
        try:
            for rank in range(world):
                log = open(tmp_path / f"rank{rank}.log", "wb")  # noqa: SIM115
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "paperworks.services.training.cornstarch.worker", tmp],
                        env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},  # one node
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=_die_with_parent,
                    )
                )
                log.close()
            if on_start is not None:
                on_start([p.pid for p in procs])
            deadline = time.monotonic() + timeout
            while any(p.poll() is None for p in procs):
                failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
                if failed:
                    tail = (tmp_path / f"rank{failed[0]}.log").read_text(errors="replace")[-2000:]
                    raise WorkerFailed(f"rank {failed[0]} exited {procs[failed[0]].returncode}: {tail}")
                if time.monotonic() > deadline:
                    raise WorkerFailed(f"workers still running after {timeout:.0f} s")
                if poll is not None:
                    poll(step_records(tmp_path, world))
                time.sleep(0.05)
            failed = [r for r, p in enumerate(procs) if p.returncode != 0]
            if failed:
                tail = (tmp_path / f"rank{failed[0]}.log").read_text(errors="replace")[-2000:]
                raise WorkerFailed(f"rank {failed[0]} exited {procs[failed[0]].returncode}: {tail}")
            return [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(world)]
        finally:
            _kill(procs)
