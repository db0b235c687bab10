"""The relay: publishes committed intake records (outbox rows, then marked sent) and
job events (`job_events` rows past the service's cursor, which then moves) to Kafka.

Nothing reaches Kafka unless its transaction committed. A crash between the
publish and the mark republishes the rows (at-least-once); consumers are
idempotent. The broker of the embedded stack keeps messages in memory only, so
after a broker restart the relay republishes from the database.

Rows are picked up by a poll every `relay_interval_s` (at once again only while a
backlog fills whole batches): a job's start does not wait for the relay (servers
hand jobs to Celery themselves), and batches of many rows cost far less CPU per
row than a publish per commit, CPU that a job's own processes share on a small
machine. On SQLite a poll first asks the commit counter (`CommitProbe`) and skips
the query when nothing was committed.
Once job intake is in Kafka the relay nudges the service's dispatchers
(`paperworks.shared.bus.nudge`), so they fetch it at once.
"""
from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from datetime import UTC, datetime

from paperworks.shared.bus.handoff import Handoff
from paperworks.shared.bus.nudge import NudgeSender
from paperworks.shared.config import Settings
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import EVENTS, EVENTS_TOPIC, JOBS, OUTBOX, JobStore, jobs_topic
from paperworks.shared.db.models import RelayCursor, utcnow
from sqlalchemy import Row, Select, bindparam, select, text, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite

CURSORS = RelayCursor.__table__
_MARK_SENT = (update(OUTBOX).where(OUTBOX.c.id.in_(bindparam("ids", expanding=True)))
              .values(sent_at=bindparam("at", type_=OUTBOX.c.sent_at.type)))

log = logging.getLogger(__name__)


class OutboxRelay:
    def __init__(self, settings: Settings, db: Database, service: str, batch: int = 500):
        self.settings = settings
        self.db = db
        self.service = service
        self.batch = batch
        self._producer = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._probe = None  # created by the relay's own thread, which alone uses it
        self._nudges = NudgeSender(settings, service)
        self._handoff = Handoff(settings, service)
        self._intake_topic = jobs_topic(service)
        # built once: building a statement costs more than SQLite takes to run it
        self._unsent = (
            select(OUTBOX.c.id, OUTBOX.c.topic, OUTBOX.c.key, OUTBOX.c.payload)
            .where(OUTBOX.c.service == service, OUTBOX.c.sent_at.is_(None))
            .order_by(OUTBOX.c.id)
            .limit(batch)
        )
        self._cursor = select(CURSORS.c.tx, CURSORS.c.event_id).where(CURSORS.c.service == service)
        # SQLite commits event ids in order; PostgreSQL in (transaction, id) order, up to the
        # oldest transaction still running (see _relay_events)
        self._events_past_id = self._events_after(EVENTS.c.tx.is_(None),
                                                  EVENTS.c.id > bindparam("event_id"))
        self._move_cursor = (sqlite.insert(CURSORS)
                             .values(service=service, tx=0, event_id=bindparam("event_id"))
                             .on_conflict_do_update(index_elements=["service"],
                                                    set_={"event_id": bindparam("event_id")}))
        past = tuple_(EVENTS.c.tx, EVENTS.c.id) > tuple_(bindparam("tx"), bindparam("event_id"))
        finished = EVENTS.c.tx < text("pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
        self._pg_events = self._events_after(past, finished)
        self._pg_any_event = self._events_after(past, finished, limit=1)
        self._pg_lock_cursor = self._cursor.with_for_update(skip_locked=True)

    def _producer_or_none(self):
        if self._producer is None:
            from paperworks.shared.bus.kafka import make_producer

            self._producer = make_producer(self.settings)
        return self._producer

    def relay_once(self) -> int:
        """Publishes one batch of intake records, then one of events; returns how many."""
        return self._relay_intake() + self._relay_events()

    def _relay_intake(self) -> int:
        """The outbox (intake records). On PostgreSQL the rows stay locked (SKIP LOCKED) while
        they are published, so replicas split the outbox. SQLite locks the whole database for
        a writer, so there the rows are read, published outside any transaction, then marked.
        """
        query = self._unsent
        if self.db.engine.dialect.name == "postgresql":
            with self.db.write() as conn:
                rows = list(conn.execute(query.with_for_update(skip_locked=True)))
                self._mark_sent(conn, self._publish(rows))
        else:
            with self.db.read() as s:
                rows = list(s.execute(query))
            sent = self._publish(rows)
            if rows:
                with self.db.write() as conn:
                    self._mark_sent(conn, sent)
        return len(rows)

    def _relay_events(self) -> int:
        """`job_events` past this service's cursor, in commit order, then the cursor moves.

        On PostgreSQL event ids come from a sequence and need not commit in order, so the
        relay reads only rows whose transaction is older than the oldest one still running
        (the snapshot's xmin: no row can appear behind the cursor later) and orders them by
        (transaction, id); the cursor row stays locked while they are published, so replicas
        take turns (SKIP LOCKED). On SQLite one writer at a time commits ids in order.
        A crash between the publish and the cursor's update republishes the batch.
        """
        if self.db.engine.dialect.name == "postgresql":
            with self.db.read_rows() as conn:  # most rounds find nothing: no lock, no write
                seen = conn.execute(self._cursor).first()
                past = {"tx": seen.tx, "event_id": seen.event_id} if seen else {"tx": 0, "event_id": 0}
                if conn.execute(self._pg_any_event, past).first() is None:
                    return 0
            with self.db.write() as conn:
                if seen is None:
                    conn.execute(postgresql.insert(CURSORS).values(service=self.service, tx=0, event_id=0)
                                 .on_conflict_do_nothing(index_elements=["service"]))
                cursor = conn.execute(self._pg_lock_cursor).first()
                if cursor is None:
                    return 0  # another replica is publishing
                rows = list(conn.execute(self._pg_events,
                                         {"tx": cursor.tx, "event_id": cursor.event_id}))
                if rows:
                    self._send(rows)
                    conn.execute(update(CURSORS).where(CURSORS.c.service == self.service)
                                 .values(tx=rows[-1].tx, event_id=rows[-1].id))
            return len(rows)
        with self.db.read_rows() as conn:
            seen = conn.execute(self._cursor).first()
            rows = list(conn.execute(self._events_past_id,
                                     {"event_id": seen.event_id if seen else 0}))
        if rows:
            self._send(rows)
            with self.db.write() as conn:
                conn.execute(self._move_cursor, {"event_id": rows[-1].id})
        return len(rows)

    def _events_after(self, *conditions, limit: int | None = None) -> Select:
        """The service's events as Kafka records (topic, key, payload), with their position, in
        (transaction, id) order: a batch read from the (service, tx, id) index first, then
        joined to its jobs (so no planner can drive the read from the jobs table)."""
        events = (select(EVENTS.c.id, EVENTS.c.tx, EVENTS.c.job_id, EVENTS.c.seq, EVENTS.c.type,
                         EVENTS.c.state, EVENTS.c.payload, EVENTS.c.created_at)
                  .where(EVENTS.c.service == self.service, *conditions)
                  .order_by(EVENTS.c.tx, EVENTS.c.id)
                  .limit(limit or self.batch)
                  .subquery("batch"))
        return (select(events, JOBS.c.kind, JOBS.c.tenant)
                .join(JOBS, JOBS.c.id == events.c.job_id)
                .order_by(events.c.tx, events.c.id))

    def _event_record(self, row: Row) -> tuple[str, str, dict]:
        time_ = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
        return EVENTS_TOPIC, row.job_id, {
            "job_id": row.job_id, "service": self.service, "kind": row.kind,
            "tenant": row.tenant, "seq": row.seq, "type": row.type, "state": row.state,
            "time": time_.isoformat(), **(row.payload or {})}

    def _publish(self, rows: list[Row]) -> list[tuple[list[Row], datetime]]:
        """Publishes outbox rows (intake records, then the dispatchers are nudged; anything
        else after). Returns the rows with the time Kafka had them."""
        intake = [r for r in rows if r.topic == self._intake_topic]
        other = [r for r in rows if r.topic != self._intake_topic]
        sent = []
        if intake:
            sent.append((intake, self._send(intake)))
            self._nudges.send()
        if other:
            sent.append((other, self._send(other)))
        return sent

    def _send(self, rows: list[Row]) -> datetime:
        producer = self._producer_or_none()
        records = [self._event_record(r) if "seq" in r._fields else (r.topic, r.key, r.payload)
                   for r in rows]
        futures = [producer.send(topic, key=key, value=json.dumps(payload).encode())
                   for topic, key, payload in records]
        producer.flush(timeout=10)
        for f in futures:
            f.get(timeout=10)  # raises if the broker did not take it: the rows stay unsent
        return utcnow()

    @staticmethod
    def _mark_sent(conn, sent: list[tuple[list[Row], datetime]]) -> None:
        for rows, at in sent:
            conn.execute(_MARK_SENT, {"ids": [r.id for r in rows], "at": at})

    def _maybe_new_rows(self) -> bool:
        """False only when SQLite says no connection committed since the last look."""
        if self.db.engine.dialect.name != "sqlite":
            return True
        if self._probe is None:
            self._probe = self.db.commit_probe()
            return True
        return self._probe.changed()

    def sweep(self) -> list[str]:
        """Re-announces stranded jobs (see JobStore.requeue_stranded), lets expired uploads go,
        deletes what the retention settings say is old, and checkpoints SQLite's WAL."""
        self.expire_uploads()
        outbox, events = JobStore(self.db).prune(self.service, self.settings.outbox_retention_s,
                                                 self.settings.event_retention_days)
        if outbox or events:
            log.info("pruned %d published outbox row(s), %d old event(s)", outbox, events)
        self.db.checkpoint()
        after = self.settings.requeue_after_s
        stale = max(after, 3 * self.settings.job_lease_s)
        requeued = JobStore(self.db).requeue_stranded(self.service, after, stale,
                                                      unhanded=self._handoff.unhanded)
        if requeued:
            log.warning("re-announced %d stranded %s job(s): %s", len(requeued), self.service,
                        ", ".join(requeued[:5]))
        return requeued

    def expire_uploads(self) -> None:
        from paperworks.shared.artifacts import open_artifact_store
        from paperworks.shared.db.uploads import UploadStore

        orphans = UploadStore(self.db).sweep_expired()
        if orphans:
            store = open_artifact_store(self.settings)
            for sha in orphans:
                store.delete(sha)
            log.info("expired %d upload blob(s)", len(orphans))

    def run(self) -> None:
        backoff = self.settings.relay_interval_s
        next_sweep = time.monotonic() + self.settings.requeue_after_s / 2
        retry = True  # at start, and after a failure, query whatever the probe says
        while not self._stop.is_set():
            try:
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + self.settings.requeue_after_s / 2
                    self.sweep()
                sent = 0
                if self._wake.is_set() or self._maybe_new_rows() or retry:
                    self._wake.clear()  # a notify after this finds its row in the query below
                    sent = self.relay_once()
                    self.db.maybe_checkpoint()  # here, not inside a submit's or claim's commit
                retry = False
                backoff = self.settings.relay_interval_s
            except Exception as exc:  # noqa: BLE001 - broker or database down: retry, never die
                log.warning("outbox relay for %s: %s; retrying", self.service, exc)
                self._reset_producer()
                self._recreate_topics()
                sent = 0
                retry = True
                backoff = min(backoff * 2, 2.0)
            if sent < self.batch:  # no backlog: let rows gather, publish them in one batch
                self._wake.wait(backoff)

    def notify(self) -> None:
        """Called after a commit that wrote outbox rows: publish now, not at the next poll."""
        self._wake.set()

    def _recreate_topics(self) -> None:
        """A restarted in-memory broker comes back empty: topics first, then publish again."""
        from paperworks.shared.bus.kafka import ensure_topics

        with contextlib.suppress(Exception):
            ensure_topics(self.settings, [self.service], attempts=1)

    def _reset_producer(self) -> None:
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.close(timeout=1)
            self._producer = None

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=f"relay-{self.service}", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._reset_producer()
        self._nudges.close()
        self._handoff.close()
