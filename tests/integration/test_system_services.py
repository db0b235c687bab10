"""The same job flow on production-shaped backends: the machine's PostgreSQL as the
database and its Redis as the Celery broker (Kafka stays the embedded broker)."""
from __future__ import annotations

import signal
import uuid

import pytest
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from paperworks.v1 import jobs_pb2
from support import TOKENS, chain, require_system, start_stack, task_process


@pytest.fixture
def system_stack(tmp_path, pg_url):
    require_system(6379, "Redis")
    s = start_stack(
        tmp_path,
        PAPERWORKS_DATABASE_URL=pg_url,
        PAPERWORKS_CELERY_BROKER_URL="redis://127.0.0.1:6379/0",
        PAPERWORKS_CELERY_KEY_PREFIX=f"pw-test-{uuid.uuid4().hex[:8]}:",
    )
    yield s
    s.down()


def test_job_flow_and_worker_kill_on_postgresql_and_redis(system_stack):
    assert "redis" not in system_stack.state.components  # the machine's Redis, not embedded
    store = JobStore(Database(system_stack.database_url))
    with Client(endpoints=system_stack.endpoints, token=TOKENS["alice"]) as client:
        quick = client.submit("ops", "digest", seed=31, steps=3, rounds_per_step=100)
        events = list(client.watch(quick.id, timeout=60))
        assert [PROTO_TO_STATE[e.state] for e in events
                if e.type == jobs_pb2.JOB_EVENT_TYPE_STATE_CHANGED] == [
            "QUEUED", "RUNNING", "SUCCEEDED"]
        assert client.get(quick.id).result["digest"] == chain(31, 3, 100)[-1]

        long = client.submit("ops", "digest", seed=32, steps=25, rounds_per_step=20000)
        for ev in client.watch(long.id, timeout=60):
            if ev.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS and ev.progress.step >= 2:
                break
        child = task_process(system_stack.state.components["ops.worker"].pid)
        child.send_signal(signal.SIGKILL)
        done = client.wait(long.id, timeout=120)
        assert PROTO_TO_STATE[done.state] == "SUCCEEDED" and done.attempts == 2
        assert done.result["digest"] == chain(32, 25, 20000)[-1]
        terminal = [e for e in store.events_after(long.id, 0)
                    if e.type == "STATE_CHANGED" and e.state == "SUCCEEDED"]
        assert len(terminal) == 1
