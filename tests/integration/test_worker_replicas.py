"""Replicas of a service's worker pool share its queue fairly: a pool whose task processes are
all busy takes no further job off the queue (Celery would otherwise reserve one more and hold it
until its running job ends, while another replica sits idle)."""
from __future__ import annotations

import time

import pytest
from paperworks.shared.devstack.processes import ready_file
from paperworks.shared.devstack.stack import Component
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from support import TOKENS, start_stack

SHORT_JOBS = 3  # each lands on the busy replica with even odds when it may reserve: 1/8 to miss


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = start_stack(tmp_path_factory.mktemp("replicas"), PAPERWORKS_WORKER_CONCURRENCY="1")
    first = s.state.components["ops.worker"]
    s.state.components["ops.worker-2"] = Component("ops.worker-2", list(first.argv), ready_check="file")
    pid = s.start("ops.worker-2")
    deadline = time.monotonic() + 60
    ready = ready_file(s.settings, "ops.worker")  # replicas mark the pool's file with their pid
    while not (ready.exists() and ready.read_text() == str(pid)):
        assert time.monotonic() < deadline, "the second replica did not start"
        time.sleep(0.1)
    yield s
    s.down()


def test_a_busy_replica_leaves_the_next_jobs_to_an_idle_one(stack):
    with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as client:
        long = client.submit("ops", "digest", seed=1, steps=60, rounds_per_step=200_000)
        deadline = time.monotonic() + 60
        while not client.get(long.id).start_time.seconds:
            assert time.monotonic() < deadline, "the long job never started"
            time.sleep(0.05)
        ended = []
        for seed in range(2, 2 + SHORT_JOBS):
            short = client.wait(client.submit("ops", "digest", seed=seed, steps=1,
                                              rounds_per_step=10).id, timeout=120)
            assert PROTO_TO_STATE[short.state] == "SUCCEEDED"
            ended.append(short.end_time.ToDatetime())
        long = client.wait(long.id, timeout=300)
        assert PROTO_TO_STATE[long.state] == "SUCCEEDED" and long.attempts == 1
        late = [t for t in ended if t >= long.end_time.ToDatetime()]
        assert not late, (f"{len(late)} of {SHORT_JOBS} short jobs waited for the long one to end "
                          "(a busy replica held them)")
