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
    if params.mode == "until-cancelled":
        ctx.store.request_cancel(ctx.tenant, "ops", ctx.job_id)
        while True:  # a report is written, and the cancel seen, once the throttle lets it through
            ctx.progress(1, 2)
    if params.mode == "busy":
        ctx.put_json("a.json", {})
        ctx.progress(2, 2, message="done")
        ref = ctx.put_json("model.json", {})
        ctx.announce_model(ref, "a model")
        return {}
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
    job_id, outcome = run(store, tmp_path, "until-cancelled")
    assert outcome.state == "CANCELLED"
    assert store.get(None, "ops", job_id).state == "CANCELLED"


def test_a_short_job_is_two_writes_with_every_event_in_order(store, tmp_path, monkeypatch):
    """Claim, then one write with the buffered progress, artifacts, announcement and the end."""
    monkeypatch.setattr("paperworks.shared.tasks.context.WRITE_INTERVAL_S", 60.0)  # a slow CI
    job, _ = store.submit("t", "ops", "k", {"mode": "busy"})
    writes = []
    original = store.db.write

    def counted():
        writes.append(1)
        return original()

    store.db.write = counted
    try:
        outcome = run_job(SPEC, job.id, store, ArtifactStore(tmp_path), 30, 5, 3)
    finally:
        store.db.write = original
    assert outcome.state == "SUCCEEDED" and len(writes) == 2
    events = store.events_after(job.id, 0)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [(e.type, e.state) for e in events] == [
        ("STATE_CHANGED", "QUEUED"), ("STATE_CHANGED", "RUNNING"), ("PROGRESS", "RUNNING"),
        ("ARTIFACT_ADDED", "RUNNING"), ("PROGRESS", "RUNNING"), ("ARTIFACT_ADDED", "RUNNING"),
        ("MODEL_READY", "RUNNING"), ("STATE_CHANGED", "SUCCEEDED")]
    assert events[4].payload["progress"]["message"] == "done"
    assert store.get(None, "ops", job.id).progress_message == "done"
    assert sorted(a.name for a in store.artifacts(job.id)) == ["a.json", "model.json"]


def test_announcing_an_artifact_this_execution_did_not_attach_is_refused_at_once(store, tmp_path):
    from paperworks.shared.tasks.context import JobContext

    job, _ = store.submit("t", "ops", "k", {"mode": "ok"})
    claim = store.acquire(job.id, 30, 5)
    ctx = JobContext(job.id, claim.token, claim.attempt, store, ArtifactStore(tmp_path))
    with pytest.raises(ValueError, match="no artifact"):
        ctx.announce_model({"name": "m", "sha256": "0" * 64}, "nothing")


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


def test_a_lease_due_sooner_than_the_threads_next_wake_wakes_it(store, tmp_path):
    """The thread is woken only when a new lease is due before its next wake-up: one due later
    waits for that wake-up, one due sooner is renewed at its own time."""
    jobs = [store.submit("t", "ops", "k", {"mode": "ok"})[0].id for _ in range(2)]
    claims = [store.acquire(job_id, lease_s=30, max_attempts=5) for job_id in jobs]
    before = store.get(None, "ops", jobs[1]).heartbeat_at
    with HEARTBEATS.keep(store, jobs[0], claims[0].token, 30.0):
        time.sleep(0.1)  # the thread now sleeps until the slow lease is due
        with HEARTBEATS.keep(store, jobs[1], claims[1].token, 0.05):
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and \
                    store.get(None, "ops", jobs[1]).heartbeat_at == before:
                time.sleep(0.02)
    assert store.get(None, "ops", jobs[1]).heartbeat_at != before


def test_each_stages_last_report_is_written_and_the_rest_coalesce(store, tmp_path, monkeypatch):
    from paperworks.shared.tasks.context import JobContext

    monkeypatch.setattr("paperworks.shared.tasks.context.WRITE_INTERVAL_S", 60.0)
    job, _ = store.submit("t", "ops", "k", {"mode": "ok"})
    claim = store.acquire(job.id, 30, 5)
    ctx = JobContext(job.id, claim.token, claim.attempt, store, ArtifactStore(tmp_path))
    for step in range(1, 4):
        ctx.progress(step, 3, stage="init")
    for step in range(1, 3):
        ctx.progress(step, 5, stage="train")
    store.finish(job.id, claim.token, "SUCCEEDED", result={}, pending=ctx.take_pending())
    reports = [(e.payload["progress"]["stage"], e.payload["progress"]["step"])
               for e in store.events_after(job.id, 0) if e.type == "PROGRESS"]
    assert reports == [("init", 3), ("train", 2)]
