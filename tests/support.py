"""Helpers the test modules share (fixtures live in conftest.py)."""
from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path

import pytest
from paperworks.shared.config import Settings

TOKENS = {"alice": "alice-token", "bob": "bob-token"}


def chain(seed: int, steps: int, rounds: int) -> list[str]:
    """Recomputes the ops digest independently of the service."""
    state = hashlib.sha256(seed.to_bytes(8, "little")).digest()
    out = []
    for _ in range(steps):
        for _ in range(rounds):
            state = hashlib.sha256(state).digest()
        out.append(state.hex())
    return out


def _reachable(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def require_system(port: int, what: str) -> None:
    if not _reachable(port):
        if os.environ.get("PAPERWORKS_REQUIRE_SYSTEM_SERVICES") == "1":
            pytest.fail(f"{what} on 127.0.0.1:{port} is required here but unreachable")
        pytest.skip(f"{what} on 127.0.0.1:{port} unreachable")


def wait_for(condition, timeout: float) -> bool:
    """Whether `condition()` came true within `timeout` seconds (looked at every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def clean_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PAPERWORKS_")}


def stack_environ(state_dir: Path, **extra: str) -> dict[str, str]:
    env = clean_environ()
    env.update(
        PAPERWORKS_STATE_DIR=str(state_dir),
        PAPERWORKS_AUTH_TOKENS=",".join(f"{t}:{k}" for t, k in TOKENS.items()),
        PAPERWORKS_JOB_LEASE_S="2",
        PAPERWORKS_CELERY_VISIBILITY_TIMEOUT_S="8",
        PAPERWORKS_KAFKA_SESSION_TIMEOUT_MS="3000",
        PAPERWORKS_REQUEUE_AFTER_S="5",
        PAPERWORKS_LOG_LEVEL="INFO",
        # the tests' OpenAI-compatible servers listen on loopback, which auth mode refuses by default
        PAPERWORKS_RAW_MODEL_URLS="any",
        PAPERWORKS_DATA_ROOT="/",  # the tests' inputs live in temporary folders
    )
    env.update(extra)
    return env


def start_stack(state_dir: Path, services=("ops",), **extra: str):
    from paperworks.shared.devstack.stack import EmbeddedStack

    env = stack_environ(state_dir, **extra)
    settings = Settings(state_dir=state_dir)
    stack = EmbeddedStack(settings, list(services), environ=env)
    stack.up()
    stack.database_url = extra.get("PAPERWORKS_DATABASE_URL") or settings.sqlalchemy_url
    return stack




def service_fixtures(*names: str):
    """Module-scoped `stack` (an embedded stack running the named services) and `client` fixtures.

    Usage in a test module: `stack, client = service_fixtures("urban")`.
    """

    @pytest.fixture(scope="module")
    def stack(tmp_path_factory):
        s = start_stack(tmp_path_factory.mktemp(f"{'-'.join(names)}-stack"), services=names)
        yield s
        s.down()

    @pytest.fixture(scope="module")
    def client(stack):
        from paperworks.shared.sdk.client import Client

        with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as c:
            yield c

    return stack, client


def finished(client, job, timeout: float = 300):
    """The job once finished, asserting it SUCCEEDED (its error message otherwise)."""
    from paperworks.shared.rpc.convert import PROTO_TO_STATE

    final = client.wait(job.id, timeout=timeout)
    assert PROTO_TO_STATE[final.state] == "SUCCEEDED", final.error.message
    return final


def clears_its_spread(gains) -> tuple[bool, str]:
    """Mean gain > 2 standard errors of the per-seed gains: a margin sized by this run's spread."""
    import numpy as np

    g = np.asarray(gains, dtype=np.float64)
    margin = 2 * g.std(ddof=1) / np.sqrt(len(g))
    why = f"mean gain {g.mean():.4f} vs 2 s.e. {margin:.4f}, per seed {np.round(g, 4)}"
    return bool(g.mean() > margin), why


def announced_models(client, job) -> list[str]:
    """Names of the artifacts a finished job announced as models (MODEL_READY events), each
    checked against the artifact the job attached under that name."""
    from paperworks.v1 import jobs_pb2

    attached = {a.name: a.sha256 for a in job.artifacts}
    events = [e for e in client.watch(job.id, timeout=30) if e.type == jobs_pb2.JOB_EVENT_TYPE_MODEL_READY]
    assert all(attached.get(e.artifact.name) == e.artifact.sha256 and e.message for e in events), events
    return [e.artifact.name for e in events]


def free_port_here() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def task_processes(worker_pid: int) -> list:
    """The Celery worker pool's live task processes (forked: the parent's command line), not the
    short-lived child that works out the worker's device report, nor one that just exited."""
    import psutil

    worker = psutil.Process(worker_pid)
    found = []
    for child in worker.children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and child.cmdline() == worker.cmdline():
                found.append(child)
        except psutil.Error:  # gone meanwhile
            pass
    return found


def task_process(worker_pid: int):
    """The pool's one task process (a job is under way: an idle pool may hold none)."""
    [child] = task_processes(worker_pid)
    return child
