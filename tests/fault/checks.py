"""What the fault tests wait for and check after a fault: a job's progress, the relay's
publishing, an RPC in flight, a job that ended exactly once with its whole history; and
what a client does with UNAVAILABLE (call again a little later)."""
from __future__ import annotations

import time

import grpc
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.v1 import jobs_pb2


def wait_for_step(client, job_id: str, step: int) -> None:
    for ev in client.watch(job_id, timeout=120):
        if ev.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS and ev.progress.step >= step:
            return
    raise AssertionError(f"{job_id} ended before step {step}")


def wait_published(stack_store, job_ids: list[str], timeout: float = 30) -> None:
    from paperworks.shared.db.models import OutboxMessage

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with stack_store.db.session() as s:
            unsent = (s.query(OutboxMessage)
                      .filter(OutboxMessage.key.in_(job_ids), OutboxMessage.sent_at.is_(None))
                      .count())
        if not unsent:
            return
        time.sleep(0.05)
    raise AssertionError("the relay did not publish the jobs")


def wait_in_flight(stack, method: str, timeout: float = 30) -> None:
    import urllib.request

    port = stack.state.services["ops"]["metrics_port"]
    line = f'paperworks_rpc_in_flight{{method="{method}",service="ops"}} 1.0'
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if line in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode():
            return
        time.sleep(0.02)
    raise AssertionError(f"{method} never in flight")


def assert_ended_once(client, stack_store, job_id: str, expected_digest: str) -> jobs_pb2.Job:
    done = client.wait(job_id, timeout=180)
    assert PROTO_TO_STATE[done.state] == "SUCCEEDED", done.error.message
    assert done.result["digest"] == expected_digest
    events = stack_store.events_after(job_id, 0)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    terminal = [e for e in events if e.type == "STATE_CHANGED" and e.state == "SUCCEEDED"]
    assert len(terminal) == 1
    assert len(client.get(job_id).artifacts) == 1
    return done


def retry_unavailable(call, attempts: int = 40):
    """What a client does with UNAVAILABLE: the same call again, a little later."""
    for _ in range(attempts - 1):
        try:
            return call()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            time.sleep(0.5)
    return call()
