"""What a client sees while a part of the stack is down: a retryable UNAVAILABLE
from a dead server (never a hang), and submits that keep succeeding while the
Kafka broker is down: the jobs run (servers hand them to Celery), and the outbox
holds their intake records until Kafka is back."""
from __future__ import annotations

import time

import grpc
import pytest
from fault.checks import assert_ended_once, retry_unavailable
from paperworks.shared.db.jobs import OUTBOX
from sqlalchemy import func, select
from support import chain


def test_a_down_server_answers_unavailable_and_the_retry_succeeds(stack, client, stack_store):
    job = client.submit("ops", "digest", seed=500, steps=2, rounds_per_step=10)
    stack.stop("servers")
    client.close()
    try:
        with pytest.raises(grpc.RpcError) as exc:
            client.get(job.id, timeout=20)
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE  # not DEADLINE_EXCEEDED: no hang
        with pytest.raises(grpc.RpcError) as exc:
            client.submit("ops", "digest", seed=501, steps=1, rounds_per_step=1, timeout=20)
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        stack.start("servers")
        stack.wait_ready("servers")
    # a client retries UNAVAILABLE: its channel reconnects once the new server listens
    retry_unavailable(lambda: client.get(job.id, timeout=20))
    assert_ended_once(client, stack_store, job.id, chain(500, 2, 10)[-1])


def test_submits_succeed_while_the_broker_is_down_and_run_once_it_is_back(stack, client,
                                                                          stack_store):
    stack.stop("kafka")
    try:
        jobs = [client.submit("ops", "digest", seed=510 + i, steps=2, rounds_per_step=10)
                for i in range(3)]
        # the server hands them to Celery itself: they run with Kafka down; their intake
        # records wait in the outbox
        for i, j in enumerate(jobs):
            assert_ended_once(client, stack_store, j.id, chain(510 + i, 2, 10)[-1])
        assert unsent_intake(stack_store, jobs) == len(jobs)
    finally:
        stack.start("kafka")
        stack.wait_ready("kafka")
        stack.save()
    deadline = time.monotonic() + 60
    while unsent_intake(stack_store, jobs):  # the relay publishes them once Kafka is back
        assert time.monotonic() < deadline, "intake records still unsent a minute after Kafka came back"
        time.sleep(0.2)


def unsent_intake(store, jobs) -> int:
    with store.db.read_rows() as conn:
        return conn.execute(select(func.count()).select_from(OUTBOX).where(
            OUTBOX.c.key.in_([j.id for j in jobs]), OUTBOX.c.sent_at.is_(None))).scalar()
