"""A job's whole life over real sockets and processes: gRPC → outbox → Kafka →
dispatcher → Celery worker → done, on the embedded stack."""
from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from paperworks.ops.v1 import ops_pb2, ops_pb2_grpc
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import AsyncClient, Client
from paperworks.shared.sdk.errors import field_violations
from paperworks.v1 import jobs_pb2, jobs_pb2_grpc
from support import TOKENS, chain


def states(events) -> list[str]:
    return [PROTO_TO_STATE[e.state] for e in events if e.type == jobs_pb2.JOB_EVENT_TYPE_STATE_CHANGED]


def test_job_travels_to_done_with_recomputable_result(client, tmp_path):
    job = client.submit("ops", "digest", seed=7, steps=5, rounds_per_step=1000)
    assert PROTO_TO_STATE[job.state] == "QUEUED"
    events = list(client.watch(job.id, timeout=60))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert states(events) == ["QUEUED", "RUNNING", "SUCCEEDED"]
    steps = [e.progress.step for e in events if e.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS]
    assert steps == sorted(steps) and steps[-1] == 5
    done = client.get(job.id)
    expected = chain(7, 5, 1000)
    assert done.result["digest"] == expected[-1]
    assert done.progress.fraction == 1.0 and done.attempts == 1
    [path] = client.pull_artifacts(job.id, tmp_path)
    assert json.loads(path.read_text())["checkpoints"] == expected


def test_watch_replays_history_from_a_sequence_number(client):
    job = client.submit("ops", "digest", seed=1, steps=2, rounds_per_step=10)
    full = list(client.watch(job.id, timeout=60))
    tail = list(client.watch(job.id, after_seq=2, timeout=60))
    assert [e.seq for e in tail] == [e.seq for e in full][2:]


def test_idempotent_resubmission_returns_the_same_job(client):
    first = client.submit("ops", "digest", seed=3, steps=1, rounds_per_step=1,
                          idempotency_key="once")
    again = client.submit("ops", "digest", seed=3, steps=1, rounds_per_step=1,
                          idempotency_key="once")
    assert again.id == first.id
    with pytest.raises(grpc.RpcError) as exc:
        client.submit("ops", "digest", seed=4, steps=1, rounds_per_step=1, idempotency_key="once")
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(exc.value)[0][0] == "idempotency_key"


def test_transient_failure_is_retried_and_ends_once(client):
    job = client.submit("ops", "digest", seed=5, steps=4, rounds_per_step=10, fail_once_at_step=2)
    events = list(client.watch(job.id, timeout=60))
    done = client.get(job.id)
    assert PROTO_TO_STATE[done.state] == "SUCCEEDED" and done.attempts == 2
    assert done.result["digest"] == chain(5, 4, 10)[-1]
    assert any(e.type == jobs_pb2.JOB_EVENT_TYPE_RETRYING for e in events)
    assert states(events).count("SUCCEEDED") == 1


def test_cancel_running_job_stops_it(client):
    job = client.submit("ops", "digest", seed=9, steps=400, rounds_per_step=20000)
    for ev in client.watch(job.id, timeout=60):
        if ev.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS:
            break
    client.cancel(job.id)
    final = client.wait(job.id, timeout=60)
    assert PROTO_TO_STATE[final.state] == "CANCELLED"
    assert final.progress.step < 400 and not final.result.fields


@pytest.mark.parametrize(
    "params, field",
    [
        ({"seed": 1, "steps": 0, "rounds_per_step": 1}, "steps"),
        ({"seed": 1, "steps": 20000, "rounds_per_step": 1}, "steps"),
        ({"seed": 1, "steps": 1, "rounds_per_step": 0}, "rounds_per_step"),
    ],
)
def test_malformed_request_names_the_field_and_writes_nothing(client, stack_store, params, field):
    before = len(stack_store.list("alice", "ops", page_size=500)[0])
    with pytest.raises(grpc.RpcError) as exc:
        client.submit("ops", "digest", **params)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(exc.value)] == [field]
    assert field in exc.value.details()
    assert len(stack_store.list("alice", "ops", page_size=500)[0]) == before


def test_missing_or_wrong_token_is_unauthenticated(stack):
    addr = stack.endpoints["ops"]
    with grpc.insecure_channel(addr) as ch:
        stub = ops_pb2_grpc.OpsServiceStub(ch)
        request = ops_pb2.SubmitDigestRequest(seed=1, steps=1, rounds_per_step=1)
        for metadata in ((), (("authorization", "Bearer nope"),)):
            with pytest.raises(grpc.RpcError) as exc:
                stub.SubmitDigest(request, metadata=metadata, timeout=10)
            assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as exc:
            list(jobs_pb2_grpc.JobServiceStub(ch).WatchJob(
                jobs_pb2.WatchJobRequest(job_id="ops-x"), timeout=10))
        assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_tenants_are_isolated(stack, client):
    job = client.submit("ops", "digest", seed=2, steps=1, rounds_per_step=1)
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        for call in (lambda: bob.get(job.id), lambda: bob.cancel(job.id),
                     lambda: list(bob.watch(job.id, timeout=10))):
            with pytest.raises(grpc.RpcError) as exc:
                call()
            assert exc.value.code() == grpc.StatusCode.NOT_FOUND
        assert job.id not in [j.id for j in bob.list("ops", page_size=500)[0]]
    client.wait(job.id, timeout=60)
    sha = client.get(job.id).artifacts[0].sha256
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        with pytest.raises(grpc.RpcError) as exc:
            bob.pull_artifact(job.id, sha, "/tmp")
        assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_async_client_has_the_same_verbs(stack):
    async def main():
        async with AsyncClient(endpoints=stack.endpoints, token=TOKENS["alice"]) as c:
            job = await c.submit("ops", "digest", seed=11, steps=2, rounds_per_step=3)
            seen = [e.seq async for e in c.watch(job.id, timeout=60)]
            done = await c.get(job.id)
            listed, _ = await c.list("ops", states=["SUCCEEDED"], page_size=500)
            return job, seen, done, listed

    job, seen, done, listed = asyncio.run(main())
    assert seen == list(range(1, len(seen) + 1))
    assert done.result["digest"] == chain(11, 2, 3)[-1]
    assert job.id in [j.id for j in listed]


def test_health_and_reflection_are_served(stack):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with grpc.insecure_channel(stack.endpoints["ops"]) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service="paperworks.ops.v1.OpsService"), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        responses = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        names = {s.name for r in responses for s in r.list_services_response.service}
    assert {"paperworks.ops.v1.OpsService", "paperworks.v1.JobService"} <= names


def test_deadline_is_honoured(client):
    with pytest.raises(grpc.RpcError) as exc:
        client.stub("ops").ComputeDigest(
            ops_pb2.ComputeDigestRequest(seed=1, steps=100, rounds_per_step=100_000),
            metadata=client.metadata, timeout=0.05)
    assert exc.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_oversized_request_is_refused(client):
    huge = ops_pb2.SubmitDigestRequest(seed=1, steps=1, rounds_per_step=1,
                                       idempotency_key="x" * (17 * 1024 * 1024))
    with pytest.raises(grpc.RpcError) as exc:
        client.stub("ops").SubmitDigest(huge, metadata=client.metadata, timeout=30)
    assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_prometheus_metrics_count_rpcs(stack, client):
    import urllib.request

    client.stub("ops").ComputeDigest(ops_pb2.ComputeDigestRequest(seed=1, steps=1, rounds_per_step=1),
                                     metadata=client.metadata, timeout=10)
    port = stack.state.services["ops"]["metrics_port"]
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'paperworks_rpc_total{code="OK",method="ComputeDigest",service="ops"}' in body


def test_poison_intake_message_goes_to_the_dlq(stack):
    from kafka import KafkaConsumer, KafkaProducer

    bootstrap = stack.state.env["PAPERWORKS_KAFKA_BOOTSTRAP_SERVERS"]
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send("paperworks.ops.jobs", key=b"junk", value=b"not json at all")
    producer.send("paperworks.ops.jobs", key=b"ghost", value=b'{"job_id": "ops-ghost"}')
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("paperworks.dlq", bootstrap_servers=bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=20000,
                             group_id=None)
    reasons = []
    for record in consumer:
        reasons.append(json.loads(record.value)["reason"])
        if len(reasons) >= 2:
            break
    consumer.close()
    assert any("unreadable" in r for r in reasons) and any("ops-ghost" in r for r in reasons)
