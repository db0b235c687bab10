"""Faults during a job: a killed worker, a restarted dispatcher. Nothing is lost,
nothing is done twice."""
from __future__ import annotations

import signal

import psutil
import pytest
from fault.checks import assert_ended_once, wait_for_step, wait_in_flight, wait_published
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from support import chain, task_process


def test_sigkill_of_the_task_process_mid_job(stack, client, stack_store):
    job = client.submit("ops", "digest", seed=21, steps=30, rounds_per_step=20000)
    wait_for_step(client, job.id, 3)
    child = task_process(stack.state.components["ops.worker"].pid)
    child.send_signal(signal.SIGKILL)
    done = assert_ended_once(client, stack_store, job.id, chain(21, 30, 20000)[-1])
    assert done.attempts == 2


@pytest.mark.slow
def test_sigkill_of_the_whole_worker_mid_job(stack, client, stack_store):
    job = client.submit("ops", "digest", seed=22, steps=30, rounds_per_step=20000)
    wait_for_step(client, job.id, 3)
    stack.stop("ops.worker", sig=signal.SIGKILL)
    stack.start("ops.worker")
    stack.wait_ready("ops.worker")
    done = assert_ended_once(client, stack_store, job.id, chain(22, 30, 20000)[-1])
    assert done.attempts == 2


def test_jobs_submitted_while_the_dispatcher_is_down_run_and_its_late_records_change_nothing(
        stack, client, stack_store):
    """The server hands jobs to Celery itself; the dispatcher (and the relay it runs), back
    later, reads their intake records, finds them handed, and runs nothing twice."""
    stack.stop("dispatcher", sig=signal.SIGKILL)
    jobs = [client.submit("ops", "digest", seed=100 + i, steps=2, rounds_per_step=10)
            for i in range(5)]
    for i, j in enumerate(jobs):
        assert_ended_once(client, stack_store, j.id, chain(100 + i, 2, 10)[-1])
    stack.start("dispatcher")
    stack.wait_ready("dispatcher")
    wait_published(stack_store, [j.id for j in jobs])
    for i, j in enumerate(jobs):
        assert assert_ended_once(client, stack_store, j.id, chain(100 + i, 2, 10)[-1]).attempts == 1


def test_a_job_no_server_handed_over_is_dispatched_from_its_intake_record(
        stack, client, stack_store):
    """A server that died between its commit and its hand-off: the job and its intake record
    are in the database only; the relay publishes the record and the dispatcher hands it over."""
    from paperworks.shared.registry import service

    stack.stop("dispatcher", sig=signal.SIGKILL)
    params = service("ops").kind("digest").params(seed=300, steps=2, rounds_per_step=10)
    probe = client.submit("ops", "digest", seed=299, steps=1, rounds_per_step=1)
    tenant = stack_store.get(None, "ops", probe.id).tenant
    job, _ = stack_store.submit(tenant, "ops", "digest", params.model_dump(mode="json"))
    assert PROTO_TO_STATE[client.get(job.id).state] == "QUEUED"
    stack.start("dispatcher")
    stack.wait_ready("dispatcher")
    assert assert_ended_once(client, stack_store, job.id, chain(300, 2, 10)[-1]).attempts == 1


def test_a_restarted_server_loses_no_job(stack, client, stack_store):
    jobs = [client.submit("ops", "digest", seed=200 + i, steps=3, rounds_per_step=10)
            for i in range(3)]
    stack.restart("servers")
    client.close()  # reconnect to the new server process
    for i, j in enumerate(jobs):
        assert_ended_once(client, stack_store, j.id, chain(200 + i, 3, 10)[-1])


def test_sigterm_drains_in_flight_calls(stack, client):
    import threading

    from paperworks.ops.v1 import ops_pb2

    stub = client.stub("ops")
    request = ops_pb2.ComputeDigestRequest(seed=3, steps=40, rounds_per_step=50_000)
    outcome = {}

    def call():
        outcome["reply"] = stub.ComputeDigest(request, metadata=client.metadata, timeout=60)

    caller = threading.Thread(target=call)
    caller.start()
    wait_in_flight(stack, "ComputeDigest")
    server = stack.state.components["servers"]
    psutil.Process(server.pid).send_signal(signal.SIGTERM)
    caller.join(timeout=60)
    assert outcome["reply"].digest == chain(3, 40, 50_000)[-1]
    stack.start("servers")
    stack.wait_ready("servers")
    client.close()


def test_kafka_broker_restart_loses_no_job(stack, client, stack_store):
    before = [client.submit("ops", "digest", seed=300 + i, steps=6, rounds_per_step=20000)
              for i in range(3)]
    stack.restart("kafka")  # in-memory: every topic, message and offset is gone
    after = [client.submit("ops", "digest", seed=310 + i, steps=2, rounds_per_step=10)
             for i in range(3)]
    for i, j in enumerate(before):
        assert_ended_once(client, stack_store, j.id, chain(300 + i, 6, 20000)[-1])
    for i, j in enumerate(after):
        assert_ended_once(client, stack_store, j.id, chain(310 + i, 2, 10)[-1])
