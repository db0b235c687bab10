"""ops through the real stack (tests/conftest.py's embedded stack: Tansu, Redis, SQLite, the ops
server, dispatcher and Celery worker as processes): a digest job and the inline ComputeDigest,
both checked against an independent recomputation. The runtime's own behaviour (retries,
cancel, auth, DLQ...) is tested with ops jobs in tests/integration/test_job_flow.py."""
from __future__ import annotations

import json

import grpc
import pytest
from paperworks.ops.v1 import ops_pb2
from paperworks.shared.sdk.errors import field_violations
from paperworks.v1 import jobs_pb2
from support import chain, finished


def test_digest_job_returns_the_chain_and_its_checkpoints(client, tmp_path):
    job = client.submit("ops", "digest", seed=2026, steps=6, rounds_per_step=500)
    done = finished(client, job, timeout=120)
    expected = chain(2026, 6, 500)
    assert done.result["digest"] == expected[-1] and done.result["steps"] == 6
    [path] = client.pull_artifacts(job.id, tmp_path)
    assert path.name == "checkpoints.json"
    assert json.loads(path.read_text()) == {"seed": 2026, "checkpoints": expected}
    progress = [e.progress for e in client.watch(job.id, timeout=30)
                if e.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS]
    assert progress[-1].step == 6 and progress[-1].stage == "hashing"


def test_inline_rpc_checks_input_and_answers(client):
    stub = client.stub("ops")
    reply = stub.ComputeDigest(ops_pb2.ComputeDigestRequest(seed=4, steps=3, rounds_per_step=5),
                               metadata=client.metadata, timeout=10)
    assert list(reply.checkpoints) == chain(4, 3, 5) and reply.digest == chain(4, 3, 5)[-1]
    with pytest.raises(grpc.RpcError) as exc:
        stub.ComputeDigest(ops_pb2.ComputeDigestRequest(seed=4, steps=101, rounds_per_step=5),
                           metadata=client.metadata, timeout=10)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(exc.value)] == ["steps"]
