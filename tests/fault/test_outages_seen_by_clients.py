"""What a client sees while a part of the stack is down: a retryable UNAVAILABLE
from a dead server (never a hang), and submits that keep succeeding while the
Kafka broker is down (the outbox holds them until it is back)."""
from __future__ import annotations

import grpc
import pytest
from fault.checks import assert_ended_once, retry_unavailable
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from support import chain


def test_a_down_server_answers_unavailable_and_the_retry_succeeds(stack, client, stack_store):
    job = client.submit("ops", "digest", seed=500, steps=2, rounds_per_step=10)
    stack.stop("ops.server")
    client.close()
    try:
        with pytest.raises(grpc.RpcError) as exc:
            client.get(job.id, timeout=20)
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE  # not DEADLINE_EXCEEDED: no hang
        with pytest.raises(grpc.RpcError) as exc:
            client.submit("ops", "digest", seed=501, steps=1, rounds_per_step=1, timeout=20)
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        stack.start("ops.server")
        stack.wait_ready("ops.server")
    # a client retries UNAVAILABLE: its channel reconnects once the new server listens
    retry_unavailable(lambda: client.get(job.id, timeout=20))
    assert_ended_once(client, stack_store, job.id, chain(500, 2, 10)[-1])


def test_submits_succeed_while_the_broker_is_down_and_run_once_it_is_back(stack, client,
                                                                          stack_store):
    stack.stop("kafka")
    try:
        jobs = [client.submit("ops", "digest", seed=510 + i, steps=2, rounds_per_step=10)
                for i in range(3)]
        assert all(PROTO_TO_STATE[client.get(j.id).state] == "QUEUED" for j in jobs)
    finally:
        stack.start("kafka")
        stack.wait_ready("kafka")
        stack.save()
    for i, j in enumerate(jobs):
        assert_ended_once(client, stack_store, j.id, chain(510 + i, 2, 10)[-1])
