"""The job store's guarantees, on SQLite and PostgreSQL: guarded transitions,
idempotency per tenant, fencing by lease, gap-free event numbering, paging."""
from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest
from paperworks.shared.db.jobs import Acquired, Busy, Gone, LeaseLost, Pending
from paperworks.shared.db.models import OutboxMessage
from paperworks.shared.errors import InvalidArgument, NotFound

PARAMS = {"seed": 1, "steps": 3, "rounds_per_step": 1, "fail_once_at_step": 0}


def submit(store, tenant="t1", key=None, params=PARAMS):
    return store.submit(tenant, "ops", "digest", params, key)


class RecordingProducer:
    """Stands in for the Kafka producer where a test reads what the relay would send."""

    def __init__(self):
        self.sent: list[tuple[str, str, dict]] = []

    def send(self, topic, key, value):
        self.sent.append((topic, key, json.loads(value)))
        return self

    def get(self, timeout):
        return None

    def flush(self, timeout):
        return None


def older_transactions_ended(store, timeout_s: float = 30.0) -> None:
    """Waits until every transaction that began before now has ended, anywhere on the server.

    The PostgreSQL relay publishes only events whose transaction is older than the oldest one
    still running in the whole cluster (its snapshot's xmin), so a transaction of another test's
    database (the other pytest worker's stacks share the server) would otherwise hold them back.
    """
    from sqlalchemy import text

    with store.db.engine.connect() as conn:
        now = int(conn.execute(text("SELECT pg_current_xact_id()::text::bigint")).scalar())
        conn.commit()
        deadline = time.monotonic() + timeout_s
        while int(conn.execute(text(
                "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")).scalar()) <= now:
            conn.rollback()
            assert time.monotonic() < deadline, "a transaction older than the test's stayed open"
            time.sleep(0.05)


def relay_events(store, tmp_path, service="ops", settle=True) -> list[tuple[str, str, dict]]:
    """The event records the service's relay publishes now (its cursor then moves past them);
    on PostgreSQL once every older transaction has ended (`settle=False`: right away)."""
    from paperworks.shared.bus.relay import OutboxRelay
    from paperworks.shared.config import Settings

    relay = OutboxRelay(Settings(state_dir=tmp_path), store.db, service)
    relay._producer = producer = RecordingProducer()
    if settle and store.db.engine.dialect.name == "postgresql":
        older_transactions_ended(store)
    while relay._relay_events():
        pass
    return producer.sent


def test_submit_writes_job_event_and_intake_record_in_one_go(store):
    job, created = submit(store)
    assert created and job.state == "QUEUED" and job.id.startswith("ops-")
    events = store.events_after(job.id, 0)
    assert [(e.seq, e.type, e.state) for e in events] == [(1, "STATE_CHANGED", "QUEUED")]
    with store.db.session() as s:  # events are published from job_events, not the outbox
        topics = sorted(m.topic for m in s.query(OutboxMessage).filter_by(key=job.id))
    assert topics == ["paperworks.ops.jobs"]


def test_idempotency_key_is_per_tenant_and_checks_parameters(store):
    a, created_a = submit(store, "t1", "k")
    again, created_again = submit(store, "t1", "k")
    other, created_other = submit(store, "t2", "k")
    assert created_a and not created_again and created_other
    assert again.id == a.id and other.id != a.id
    with pytest.raises(InvalidArgument) as exc:
        submit(store, "t1", "k", {**PARAMS, "seed": 2})
    assert exc.value.field == "idempotency_key"


def test_concurrent_submits_with_one_key_make_one_job(store):
    ids, errors = [], []

    def go():
        try:
            ids.append(submit(store, "t1", "race")[0].id)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(ids)) == 1


def test_tenant_sees_only_its_jobs(store):
    job, _ = submit(store, "t1")
    with pytest.raises(NotFound):
        store.get("t2", "ops", job.id)
    with pytest.raises(NotFound):
        store.get("t1", "router", job.id)
    assert store.list("t2", "ops")[0] == []


def test_finished_job_cannot_be_moved_by_a_redelivery(store):
    job, _ = submit(store)
    claim = store.acquire(job.id, lease_s=30, max_attempts=5)
    assert isinstance(claim, Acquired) and claim.attempt == 1
    assert store.finish(job.id, claim.token, "SUCCEEDED", result={"digest": "x"})
    assert isinstance(store.acquire(job.id, 30, 5), Gone)
    assert not store.finish(job.id, claim.token, "FAILED", error={"code": "INTERNAL"})
    final = store.get("t1", "ops", job.id)
    assert final.state == "SUCCEEDED" and final.result == {"digest": "x"}
    terminal = [e for e in store.events_after(job.id, 0) if e.state == "SUCCEEDED"]
    assert len(terminal) == 1


def test_live_lease_blocks_takeover_and_stale_lease_allows_it(store):
    job, _ = submit(store)
    first = store.acquire(job.id, lease_s=0.5, max_attempts=5)
    assert isinstance(store.acquire(job.id, lease_s=0.5, max_attempts=5), Busy)
    time.sleep(0.6)
    second = store.acquire(job.id, lease_s=0.5, max_attempts=5)
    assert isinstance(second, Acquired) and second.attempt == 2
    # the first execution is fenced off: its writes fail, its result is never stored
    with pytest.raises(LeaseLost):
        store.report_progress(job.id, first.token, {"fraction": 0.5})
    assert not store.finish(job.id, first.token, "SUCCEEDED", result={"from": "first"})
    assert store.finish(job.id, second.token, "SUCCEEDED", result={"from": "second"})
    assert store.get(None, "ops", job.id).result == {"from": "second"}


def test_attempts_are_capped(store):
    job, _ = submit(store)
    for _ in range(2):
        claim = store.acquire(job.id, lease_s=30, max_attempts=2)
        store.release(job.id, claim.token, "transient")
    assert isinstance(store.acquire(job.id, 30, 2), Gone)
    failed = store.get(None, "ops", job.id)
    assert failed.state == "FAILED" and "2 attempts" in failed.error["message"]


def test_cancel_queued_ends_now_and_running_is_asked(store):
    queued, _ = submit(store)
    assert store.request_cancel("t1", "ops", queued.id).state == "CANCELLED"
    running, _ = submit(store)
    claim = store.acquire(running.id, 30, 5)
    assert store.request_cancel("t1", "ops", running.id).cancel_requested
    assert store.report_progress(running.id, claim.token, {"fraction": 0.1}) is True


def test_event_numbers_have_no_gaps_under_concurrent_writers(store):
    job, _ = submit(store)
    claim = store.acquire(job.id, 30, 5)

    def progress():
        for i in range(10):
            store.report_progress(job.id, claim.token, {"fraction": i / 10})

    threads = [threading.Thread(target=progress) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqs = [e.seq for e in store.events_after(job.id, 0)]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == 2 + 30


def test_list_pages_newest_first_and_filters(store):
    ids = [submit(store)[0].id for _ in range(5)]
    page1, token = store.list("t1", "ops", page_size=2)
    page2, token2 = store.list("t1", "ops", page_size=2, page_token=token)
    page3, token3 = store.list("t1", "ops", page_size=2, page_token=token2)
    seen = [j.id for j in page1 + page2 + page3]
    assert seen == list(reversed(ids)) and token3 == ""
    store.request_cancel("t1", "ops", ids[0])
    assert [j.id for j in store.list("t1", "ops", states=("CANCELLED",))[0]] == [ids[0]]
    with pytest.raises(InvalidArgument) as exc:
        store.list("t1", "ops", page_token="garbage!")
    assert exc.value.field == "page_token"


def test_stranded_jobs_are_announced_again(store):
    lost, _ = submit(store)  # its task vanished with a Redis that restarted
    handed, _ = submit(store)  # waiting in a live Celery queue: its hand-off key is there
    orphan, _ = submit(store)  # running, but its owner died without a trace
    store.acquire(orphan.id, lease_s=30, max_attempts=5)
    time.sleep(0.3)

    def unhanded(job_ids):
        assert orphan.id not in job_ids  # RUNNING jobs are not the hand-off's to judge
        return [j for j in job_ids if j != handed.id]

    assert store.requeue_stranded("ops", queued_for_s=60, stale_lease_s=60, unhanded=unhanded) == []
    announced_at = datetime.now(UTC)
    requeued = store.requeue_stranded("ops", queued_for_s=0.2, stale_lease_s=0.2,
                                      unhanded=unhanded)
    assert sorted(requeued) == sorted([lost.id, orphan.id])
    with store.db.session() as s:
        intake = s.query(OutboxMessage).filter_by(key=lost.id, topic="paperworks.ops.jobs").count()
    assert intake == 2
    # not twice at once: announcing restarts each job's clock (no wall-clock race in the check)
    for job_id in requeued:
        updated = store.get(None, "ops", job_id).updated_at
        assert (updated if updated.tzinfo else updated.replace(tzinfo=UTC)) >= announced_at


def test_a_takeover_reattaching_an_artifact_name_keeps_one_reference_to_the_last_bytes(store):
    job, _ = submit(store)
    first = store.acquire(job.id, lease_s=0.2, max_attempts=5)
    store.attach_artifact(job.id, first.token, "out.json", "a" * 64, "application/json", 3)
    time.sleep(0.3)
    second = store.acquire(job.id, lease_s=0.2, max_attempts=5)
    with pytest.raises(LeaseLost):
        store.attach_artifact(job.id, first.token, "out.json", "c" * 64, "application/json", 9)
    store.attach_artifact(job.id, second.token, "out.json", "b" * 64, "application/json", 4)
    store.attach_artifact(job.id, second.token, "other.json", "a" * 64, "application/json", 3)
    refs = {a.name: (a.sha256, a.size_bytes) for a in store.artifacts(job.id)}
    assert refs == {"out.json": ("b" * 64, 4), "other.json": ("a" * 64, 3)}
    seqs = [e.seq for e in store.events_after(job.id, 0)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_model_is_announced_only_as_an_attached_artifact_and_only_by_the_lease_holder(store, tmp_path):
    job, _ = submit(store)
    run = store.acquire(job.id, lease_s=30, max_attempts=5)
    ref = {"sha256": "d" * 64, "name": "model.safetensors", "media_type": "application/octet-stream",
           "size_bytes": 7}
    with pytest.raises(ValueError, match="no artifact model.safetensors"):
        store.announce_model(job.id, run.token, ref, "not attached yet")
    store.attach_artifact(job.id, run.token, ref["name"], ref["sha256"], ref["media_type"], 7)
    with pytest.raises(ValueError):
        store.announce_model(job.id, run.token, {**ref, "sha256": "e" * 64}, "other bytes")
    with pytest.raises(LeaseLost):
        store.announce_model(job.id, "not-the-lease", ref, "a stale worker")
    store.announce_model(job.id, run.token, ref, "2-bit checkpoint")
    events = store.events_after(job.id, 0)
    assert [e.type for e in events] == ["STATE_CHANGED", "STATE_CHANGED", "ARTIFACT_ADDED", "MODEL_READY"]
    assert [e.seq for e in events] == [1, 2, 3, 4]  # the refused announcements took no number
    assert events[-1].payload == {"artifact": ref, "message": "2-bit checkpoint"}
    published = [value for topic, _, value in relay_events(store, tmp_path)]
    ready = [p for p in published if p["type"] == "MODEL_READY"]
    assert len(ready) == 1 and ready[0]["artifact"] == ref and ready[0]["service"] == "ops"


def test_postgres_sessions_drop_dead_peers_and_idle_transactions(pg_url):
    """A half-open connection must not keep row locks forever: keepalives on the client,
    idle-in-transaction timeout on the server; a URL's own setting wins."""
    from paperworks.shared.db.engine import make_engine
    from sqlalchemy import text

    engine = make_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar() == "1min"
        params = conn.connection.dbapi_connection.info.get_parameters()
        assert params["keepalives"] == "1" and params["tcp_user_timeout"] == "60000"
    engine.dispose()
    engine = make_engine(pg_url + "?keepalives_idle=5")
    with engine.connect() as conn:
        assert conn.connection.dbapi_connection.info.get_parameters()["keepalives_idle"] == "5"
    engine.dispose()


def test_pruning_deletes_published_outbox_rows_and_old_events_but_the_terminal_one(store):
    from datetime import timedelta

    from paperworks.shared.db.jobs import JOBS, OUTBOX
    from sqlalchemy import func, select

    done, _ = submit(store)
    run = store.acquire(done.id, lease_s=30, max_attempts=5)
    store.report_progress(done.id, run.token, {"step": 1})
    store.finish(done.id, run.token, "SUCCEEDED", result={})
    waiting, _ = submit(store)
    with store.db.write() as conn:  # the relay published everything of `done`, nothing of `waiting`
        conn.execute(OUTBOX.update().where(OUTBOX.c.key == done.id)
                     .values(sent_at=datetime.now(UTC) - timedelta(hours=2)))
    assert store.prune("ops", sent_before_s=3600, finished_before_days=0) == (1, 0)
    with store.db.read_rows() as conn:
        assert conn.execute(select(func.count()).select_from(OUTBOX)).scalar() == 1  # waiting's
    assert len(store.events_after(done.id, 0)) == 4
    with store.db.write() as conn:
        conn.execute(JOBS.update().where(JOBS.c.id == done.id)
                     .values(finished_at=datetime.now(UTC) - timedelta(days=3)))
    assert store.prune("ops", sent_before_s=3600, finished_before_days=2) == (0, 3)
    [last] = store.events_after(done.id, 0)
    assert (last.type, last.state) == ("STATE_CHANGED", "SUCCEEDED")  # a watch still ends
    assert len(store.events_after(waiting.id, 0)) == 1


def test_the_relay_publishes_each_event_once_in_order_with_the_jobs_identity(store, tmp_path):
    job, _ = submit(store, "t9")
    run = store.acquire(job.id, lease_s=30, max_attempts=5)
    store.report_progress(job.id, run.token, {"step": 1})
    first = relay_events(store, tmp_path)
    store.finish(job.id, run.token, "SUCCEEDED", result={})
    other = store.submit("t9", "segmenter", "train", {}, None)[0]  # another service's relay sends it
    second = relay_events(store, tmp_path)
    records = first + second
    assert {topic for topic, _, _ in records} == {"paperworks.events"}
    assert [(key, p["seq"], p["type"], p["state"]) for _, key, p in records] == [
        (job.id, 1, "STATE_CHANGED", "QUEUED"), (job.id, 2, "STATE_CHANGED", "RUNNING"),
        (job.id, 3, "PROGRESS", "RUNNING"), (job.id, 4, "STATE_CHANGED", "SUCCEEDED")]
    assert all(p["tenant"] == "t9" and p["service"] == "ops" and p["kind"] == "digest"
               for _, _, p in records)
    assert records[2][2]["progress"] == {"step": 1} and "T" in records[0][2]["time"]
    assert relay_events(store, tmp_path) == []  # the cursor moved past them
    assert [p["job_id"] for _, _, p in relay_events(store, tmp_path, "segmenter")] == [other.id]


def test_a_failed_publish_leaves_the_cursor_so_the_events_go_again(store, tmp_path):
    from paperworks.shared.bus.relay import OutboxRelay
    from paperworks.shared.config import Settings

    job, _ = submit(store)

    class Refusing(RecordingProducer):
        def get(self, timeout):
            raise TimeoutError("broker down")

    relay = OutboxRelay(Settings(state_dir=tmp_path), store.db, "ops")
    relay._producer = Refusing()
    if store.db.engine.dialect.name == "postgresql":  # else the relay may see nothing to publish
        older_transactions_ended(store)
    with pytest.raises(TimeoutError):
        relay._relay_events()
    assert [p["seq"] for _, _, p in relay_events(store, tmp_path)] == [1]


def test_on_postgres_an_event_committed_late_behind_a_later_id_is_not_skipped(pg_url, tmp_path):
    """Sequence ids do not follow commit order: a transaction holding a lower id may commit
    after one holding a higher id has been published. The relay waits for it (snapshot xmin)."""
    from paperworks.shared.db.engine import Database
    from paperworks.shared.db.jobs import JobStore
    from paperworks.shared.db.migrate import upgrade

    upgrade(pg_url)
    store = JobStore(Database(pg_url))
    slow, _ = submit(store)
    fast, _ = submit(store)
    assert len(relay_events(store, tmp_path)) == 2
    run_slow = store.acquire(slow.id, lease_s=30, max_attempts=5)
    run_fast = store.acquire(fast.id, lease_s=30, max_attempts=5)
    assert len(relay_events(store, tmp_path)) == 2
    held = store.db.engine.connect()
    tx = held.begin()
    store._insert_event(held, slow.id, 3, ("ops", "digest", "t1"), "PROGRESS", "RUNNING", {"step": 7})
    store.report_progress(fast.id, run_fast.token, {"step": 1})  # a later id, committed first
    assert relay_events(store, tmp_path, settle=False) == []  # held back while the earlier writer
    # is open
    tx.commit()
    held.close()
    late = relay_events(store, tmp_path)
    assert [(k, p["type"]) for _, k, p in late] == [(slow.id, "PROGRESS"), (fast.id, "PROGRESS")]
    assert run_slow.token


def test_watch_notices_follow_commits_but_a_submit_needs_none(store):
    from paperworks.shared.db.jobs import JobStore

    heard = []
    noticing = JobStore(store.db, on_events=heard.extend)
    job, _ = noticing.submit("t1", "ops", "digest", PARAMS, None)
    assert heard == []  # no watch can start before the job exists; it reads event 1 first
    run = noticing.acquire(job.id, lease_s=30, max_attempts=5)
    noticing.report_progress(job.id, run.token, {"step": 1})
    assert heard == [("ops", job.id, 2, False), ("ops", job.id, 3, False)]
    # a job's end says it is one (its watchers are woken at once, not after the hold)
    noticing.finish(job.id, run.token, "SUCCEEDED", result={},
                    pending=[Pending.progress({"step": 2, "total_steps": 2})])
    assert heard[2:] == [("ops", job.id, 5, True)]
