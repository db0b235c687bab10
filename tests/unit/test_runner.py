"""The job runner's outcomes, with a real job store and handlers that misbehave on purpose."""
from __future__ import annotations

import sys
import threading
import time
import types

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.registry import JobKind, ServiceSpec
from paperworks.shared.tasks.runner import HEARTBEATS, RetryLater, TransientError, run_job
from pydantic import BaseModel
from sqlalchemy.exc import OperationalError


class Params(BaseModel):
    mode: str


def handler(params: Params, ctx):
    ctx.progress(1, 2, message="half")
    if params.mode == "ok":
        ctx.put_json("out.json", {"attempt": ctx.attempt})
        return {"attempt": ctx.attempt}
    if params.mode == "transient" and ctx.attempt == 1:
        raise TransientError("remote down")
    if params.mode == "transient":
        return {"attempt": ctx.attempt}
    if params.mode == "bad-data":
        raise InvalidArgument("dataset.rows[3]", "label out of range")
    if params.mode == "timeout":
        raise SoftTimeLimitExceeded()
    raise ZeroDivisionError("bug")


module = types.ModuleType("runner_test_handlers")
module.handler = handler
sys.modules["runner_test_handlers"] = module
SPEC = ServiceSpec("ops", "test", "x:y", "x", "X",
                   {"k": JobKind("k", Params, "runner_test_handlers:handler", "SubmitK")})


def run(store, tmp_path, mode, retries_left=3):
    job, _ = store.submit("t", "ops", "k", {"mode": mode})
    outcome = run_job(SPEC, job.id, store, ArtifactStore(tmp_path), 30, 5, retries_left)
    return job.id, outcome


def test_success_stores_result_and_artifact(store, tmp_path):
    job_id, outcome = run(store, tmp_path, "ok")
    job = store.get(None, "ops", job_id)
    assert outcome.state == "SUCCEEDED" and job.result == {"attempt": 1}
    assert [a.name for a in store.artifacts(job_id)] == ["out.json"]


def test_transient_error_releases_the_lease_for_a_retry(store, tmp_path):
    job, _ = store.submit("t", "ops", "k", {"mode": "transient"})
    with pytest.raises(RetryLater):
        run_job(SPEC, job.id, store, ArtifactStore(tmp_path), 30, 5, retries_left=1)
    second = run_job(SPEC, job.id, store, ArtifactStore(tmp_path), 30, 5, retries_left=0)
    done = store.get(None, "ops", job.id)
    assert second.state == "SUCCEEDED" and done.result == {"attempt": 2} and done.attempts == 2


def test_transient_error_without_retries_left_fails_retryable(store, tmp_path):
    job_id, outcome = run(store, tmp_path, "transient", retries_left=0)
    error = store.get(None, "ops", job_id).error
    assert outcome.state == "FAILED" and error["code"] == "UNAVAILABLE" and error["retryable"]


@pytest.mark.parametrize("mode, code", [("bad-data", "INVALID_ARGUMENT"),
                                        ("timeout", "DEADLINE_EXCEEDED"),
                                        ("bug", "INTERNAL")])
def test_failures_carry_a_precise_error(store, tmp_path, mode, code):
    job_id, outcome = run(store, tmp_path, mode)
    error = store.get(None, "ops", job_id).error
    assert outcome.state == "FAILED" and error["code"] == code
    if mode == "bad-data":
        assert error["field_violations"] == [{"field": "dataset.rows[3]",
                                              "description": "label out of range"}]


def test_cancel_requested_while_running_ends_cancelled(store, tmp_path):
    job, _ = store.submit("t", "ops", "k", {"mode": "ok"})
    original = store.report_progress

    def cancel_then_report(job_id, token, progress):
        store.request_cancel("t", "ops", job_id)
        return original(job_id, token, progress)

    store.report_progress = cancel_then_report
    outcome = run_job(SPEC, job.id, store, ArtifactStore(tmp_path), 30, 5, 3)
    assert outcome.state == "CANCELLED"
    assert store.get(None, "ops", job.id).state == "CANCELLED"


def test_unreachable_database_at_claim_retries_the_task_instead_of_losing_the_job(store, tmp_path):
    job, _ = store.submit("t", "ops", "k", {"mode": "ok"})
    original = store.acquire

    def database_down(*_args):
        raise OperationalError("UPDATE jobs ...", {}, ConnectionError("server closed the connection"))

    store.acquire = database_down
    with pytest.raises(RetryLater):
        run_job(SPEC, job.id, store, ArtifactStore(tmp_path), 30, 5, 3)
    assert store.get(None, "ops", job.id).state == "QUEUED"
    store.acquire = original
    assert run_job(SPEC, job.id, store, ArtifactStore(tmp_path), 30, 5, 3).state == "SUCCEEDED"


def test_one_heartbeat_thread_renews_every_running_lease(store, tmp_path):
    jobs = [store.submit("t", "ops", "k", {"mode": "ok"})[0].id for _ in range(2)]
    claims = [store.acquire(job_id, lease_s=30, max_attempts=5) for job_id in jobs]

    def beats():
        return [store.get(None, "ops", job_id).heartbeat_at for job_id in jobs]

    before = beats()
    threads = threading.active_count()
    with HEARTBEATS.keep(store, jobs[0], claims[0].token, 0.05), \
            HEARTBEATS.keep(store, jobs[1], claims[1].token, 0.05):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and set(beats()) & set(before):
            time.sleep(0.02)
        assert threading.active_count() <= threads + 1
    assert not set(beats()) & set(before)
