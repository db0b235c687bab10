"""The job store: every change to a job is one guarded transaction.

Each state change is a compare-and-set (`UPDATE ... WHERE state IN (...)`), so
a redelivered or duplicated task cannot move a job that has already finished.
Each change also appends the job's next event (numbered by the job row's own
counter, so concurrent writers cannot reuse a number), which the relay publishes
to Kafka after the commit; a submit also writes the job's intake outbox row.

The writes go through Core statements on one connection (`Database.write`):
each is one short transaction whose guarded UPDATE returns what the rest of it
needs (the event number, the job's identity), so a trivial job's whole life is
four one-row writes by its worker and nothing is read back after a commit.

A running job is owned by the execution holding its `run_token`; the owner
heartbeats, and another execution may take over only when that heartbeat is
older than the lease. Every write by an execution names its token (fencing).
"""
from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from paperworks.shared.db.engine import Database
from paperworks.shared.db.models import (
    ALL_STATES,
    CANCELLED,
    FAILED,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    TERMINAL_STATES,
    Artifact,
    Job,
    JobArtifact,
    JobEvent,
    OutboxMessage,
    utcnow,
)
from paperworks.shared.errors import InvalidArgument, NotFound
from sqlalchemy import (
    BigInteger,
    Connection,
    Row,
    String,
    Table,
    and_,
    bindparam,
    func,
    insert,
    null,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

EVENTS_TOPIC = "paperworks.events"
DLQ_TOPIC = "paperworks.dlq"

STATE_CHANGED = "STATE_CHANGED"
PROGRESS = "PROGRESS"
ARTIFACT_ADDED = "ARTIFACT_ADDED"
CANCEL_REQUESTED = "CANCEL_REQUESTED"
RETRYING = "RETRYING"
MODEL_READY = "MODEL_READY"


JOBS: Table = Job.__table__
EVENTS: Table = JobEvent.__table__
OUTBOX: Table = OutboxMessage.__table__
ARTIFACTS: Table = Artifact.__table__
JOB_ARTIFACTS: Table = JobArtifact.__table__
# PostgreSQL's id of the writing transaction, as a number (xid8 has no cast to bigint)
CURRENT_TX = text("pg_current_xact_id()::text::bigint")
_EVENT_INSERT = insert(EVENTS)
_OUTBOX_INSERT = insert(OUTBOX)
_JOB_BY_ID = select(JOBS).where(JOBS.c.id == bindparam("b_id"))
_EVENTS_AFTER = (select(EVENTS)
                 .where(EVENTS.c.job_id == bindparam("b_id"), EVENTS.c.seq > bindparam("b_after"))
                 .order_by(EVENTS.c.seq)
                 .limit(bindparam("b_limit")))
_EVENT_INSERT_PG = insert(EVENTS).values(tx=CURRENT_TX)
# the hot statements, built once with bound parameters (building one with literal values costs
# more than running it on SQLite); `_statement(key, build)` keeps each per key
_STATEMENTS: dict = {}


def _statement(key, build):
    stmt = _STATEMENTS.get(key)
    if stmt is None:
        stmt = _STATEMENTS[key] = build()
    return stmt


def _at(name: str):
    """A bound timestamp, typed as the jobs' timestamps (SQLite stores them by the type)."""
    return bindparam(name, type_=JOBS.c.updated_at.type)
# what every guarded update returns: the event number it took and the job's identity
_SEQ_AND_IDENTITY = (JOBS.c.event_seq, JOBS.c.service, JOBS.c.kind, JOBS.c.tenant)


_WRITTEN = "paperworks_events_written"  # Connection.info key: the events of its transaction


def jobs_topic(service: str) -> str:
    return f"paperworks.{service}.jobs"


class LeaseLost(Exception):
    """This execution no longer owns the job (it finished, or another took over)."""


@dataclass(frozen=True)
class Pending:
    """An event a running job produced and has not written yet (see JobContext's buffering)."""

    type: str
    payload: dict

    @classmethod
    def progress(cls, progress: dict) -> Pending:
        return cls(PROGRESS, {"progress": progress})

    @classmethod
    def artifact(cls, ref: dict) -> Pending:
        return cls(ARTIFACT_ADDED, {"artifact": ref})

    @classmethod
    def model(cls, artifact: dict, message: str) -> Pending:
        return cls(MODEL_READY, {"artifact": artifact, "message": message})


@dataclass(frozen=True)
class Acquired:
    """This execution owns the job; `kind` and `params` come from the claiming update."""

    token: str
    attempt: int
    kind: str
    params: dict


@dataclass(frozen=True)
class Busy:
    """Another execution holds a live lease; try again after `retry_in` seconds."""

    retry_in: float


@dataclass(frozen=True)
class Gone:
    """The job is terminal or unknown: nothing to run."""

    state: str | None


class JobStore:
    def __init__(self, db: Database,
                 on_events: Callable[[list[tuple[str, str, int, bool]]], None] | None = None):
        """`on_events((service, job id, seq, final), ...)` is called after each commit that wrote
        events (`final`: the job's terminal state change among them), for the pushed watches'
        notices (`paperworks.shared.bus.watch`)."""
        self.db = db
        self.on_events = on_events

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction; after its commit, `on_events` hears which events it wrote."""
        written: list[tuple[str, str, int, bool]] = []
        with self.db.write() as conn:
            conn.info[_WRITTEN] = written
            try:
                yield conn
            finally:
                conn.info.pop(_WRITTEN, None)
        if written and self.on_events is not None:
            self.on_events(written)

    # --- intake -----------------------------------------------------------------

    def submit(
        self,
        tenant: str,
        service: str,
        kind: str,
        params: dict,
        idempotency_key: str | None = None,
        parent_job_id: str | None = None,
    ) -> tuple[Job, bool]:
        """Writes the QUEUED job, its first event and its intake outbox row; or finds the keyed job.

        The returned Job holds exactly the values the transaction inserted (no read-back).
        """
        key = idempotency_key or None
        job_id = f"{service}-{uuid.uuid4().hex}"
        now = utcnow()
        row = {
            "id": job_id, "tenant": tenant, "service": service, "kind": kind, "state": QUEUED,
            "params": params, "result": None, "error": None, "idempotency_key": key,
            "progress_fraction": 0.0, "progress_stage": "", "progress_step": 0,
            "progress_total": 0, "progress_message": "", "cancel_requested": False,
            "attempts": 0, "run_token": None, "heartbeat_at": None,
            "event_seq": 1, "created_at": now, "updated_at": now, "started_at": None,
            "finished_at": None, "parent_job_id": parent_job_id or None,
        }
        with self._write() as conn:
            # a keyed insert that meets an earlier job with the key inserts nothing (no error,
            # no second statement): the earlier job is then the answer
            dialect = _dialect(conn)
            inserted = conn.execute(  # values as parameters: the statement compiles once
                _statement(("submit", conn.dialect.name), lambda: (
                    dialect.insert(JOBS)
                    .on_conflict_do_nothing(index_elements=["tenant", "service", "idempotency_key"])
                    .returning(JOBS.c.id))), row).first()
            if inserted is not None:
                conn.execute(_OUTBOX_INSERT, {
                    "service": service, "topic": jobs_topic(service), "key": job_id,
                    "payload": {"job_id": job_id, "service": service, "kind": kind},
                    "created_at": now,
                })
                # no watch notice: nobody can watch a job before this commit makes it exist, and
                # a watch reads the events already there first (saves waking the publisher)
                self._insert_event(conn, job_id, 1, (service, kind, tenant), STATE_CHANGED,
                                   QUEUED, {}, now, notify=False)
        if inserted is None:
            return self._check_same_request(self._find_keyed(tenant, service, key), kind,
                                            params), False
        return Job(**row), True

    def _find_keyed(self, tenant: str, service: str, key: str) -> Job | None:
        with self.db.read() as s:
            return s.scalar(
                select(Job).where(
                    Job.tenant == tenant, Job.service == service, Job.idempotency_key == key
                )
            )

    @staticmethod
    def _check_same_request(job: Job, kind: str, params: dict) -> Job:
        if job.kind != kind or job.params != params:
            raise InvalidArgument(
                "idempotency_key",
                f"already used for job {job.id} with different parameters",
            )
        return job

    # --- reads ------------------------------------------------------------------

    def intake_view(self, job_id: str) -> Row | None:
        """What the dispatcher needs to route an intake message: the job's service, kind, state."""
        with self.db.read_rows() as conn:
            return conn.execute(
                select(JOBS.c.service, JOBS.c.kind, JOBS.c.state).where(JOBS.c.id == job_id)
            ).first()

    def get(self, tenant: str | None, service: str | None, job_id: str) -> Job:
        """A job visible to `tenant` on `service`; NOT_FOUND otherwise (never 'forbidden')."""
        rows = self.db.query(_JOB_BY_ID, {"b_id": job_id}) if job_id else ()
        job = Job(**rows[0]._mapping) if rows else None
        if job is None or (tenant is not None and job.tenant != tenant) or (
            service is not None and job.service != service
        ):
            raise NotFound(f"job {job_id!r} not found", "job_id")
        return job

    def artifacts(self, job_id: str) -> list[JobArtifact]:
        with self.db.read() as s:
            return list(
                s.scalars(
                    select(JobArtifact).where(JobArtifact.job_id == job_id).order_by(JobArtifact.id)
                )
            )

    def list(
        self,
        tenant: str,
        service: str,
        kind: str = "",
        states: tuple[str, ...] = (),
        page_size: int = 50,
        page_token: str = "",
    ) -> tuple[list[Job], str]:
        """Newest first, keyset-paged on (created_at, id) so pages stay stable under inserts."""
        if page_size < 0 or page_size > 500:
            raise InvalidArgument("page_size", "must be between 0 and 500")
        page_size = page_size or 50
        for st in states:
            if st not in ALL_STATES:
                raise InvalidArgument("states", f"unknown state {st!r}")
        query = select(Job).where(Job.tenant == tenant, Job.service == service)
        if kind:
            query = query.where(Job.kind == kind)
        if states:
            query = query.where(Job.state.in_(states))
        if page_token:
            created, last_id = _decode_token(page_token)
            query = query.where(
                or_(Job.created_at < created, and_(Job.created_at == created, Job.id < last_id))
            )
        query = query.order_by(Job.created_at.desc(), Job.id.desc()).limit(page_size + 1)
        with self.db.read() as s:
            jobs = list(s.scalars(query))
        next_token = ""
        if len(jobs) > page_size:
            jobs = jobs[:page_size]
            next_token = _encode_token(jobs[-1])
        return jobs, next_token

    def events_after(self, job_id: str, after_seq: int, limit: int = 500) -> list[Row]:
        """The job's events after `after_seq`, in order, as rows with JobEvent's columns."""
        return self.db.query(_EVENTS_AFTER, {"b_id": job_id, "b_after": after_seq, "b_limit": limit})

    def announced_models(self, job_id: str) -> list[dict]:
        """The artifacts (name, sha256, ...) the job announced with MODEL_READY events, in order."""
        with self.db.read_rows() as conn:
            payloads = conn.execute(
                select(EVENTS.c.payload)
                .where(EVENTS.c.job_id == job_id, EVENTS.c.type == MODEL_READY)
                .order_by(EVENTS.c.seq)
            ).scalars()
            return [p["artifact"] for p in payloads]

    # --- cancellation -----------------------------------------------------------

    def request_cancel(self, tenant: str, service: str, job_id: str) -> Job:
        """QUEUED jobs end CANCELLED now; RUNNING jobs are asked to stop at their next step."""
        self.get(tenant, service, job_id)
        with self._write() as conn:
            if not self._cas(conn, job_id, (QUEUED,), CANCELLED, {"finished_at": utcnow()}):
                row = conn.execute(
                    update(JOBS)
                    .where(JOBS.c.id == job_id, JOBS.c.state == RUNNING,
                           JOBS.c.cancel_requested.is_(False))
                    .values(cancel_requested=True, event_seq=JOBS.c.event_seq + 1,
                            updated_at=utcnow())
                    .returning(*_SEQ_AND_IDENTITY)
                ).first()
                if row is not None:
                    self._insert_event(conn, job_id, row[0], row[1:], CANCEL_REQUESTED, RUNNING, {})
        return self.get(tenant, service, job_id)

    # --- execution --------------------------------------------------------------

    def acquire(self, job_id: str, lease_s: float, max_attempts: int) -> Acquired | Busy | Gone:
        """Claims the job for one execution: QUEUED, or RUNNING with an expired lease.

        One guarded UPDATE claims it and returns its kind and parameters; only when it
        matches nothing does a read tell why (finished, attempts used up, or held).
        """
        token = uuid.uuid4().hex
        now = utcnow()
        stale = now - timedelta(seconds=lease_s)
        with self._write() as conn:
            row = conn.execute(_statement("acquire", _acquire_statement), {
                "b_id": job_id, "b_max": max_attempts, "b_stale": stale, "b_token": token, "b_now": now,
            }).first()
            if row is not None:
                seq, service, kind, tenant, attempt, params = row
                message = "started" if attempt == 1 else f"taken over (attempt {attempt})"
                self._insert_event(conn, job_id, seq, (service, kind, tenant), STATE_CHANGED,
                                   RUNNING, {"message": message}, now)
                return Acquired(token, attempt, kind, params)
            job = conn.execute(
                select(JOBS.c.state, JOBS.c.attempts, JOBS.c.heartbeat_at).where(JOBS.c.id == job_id)
            ).first()
            if job is None or job.state in TERMINAL_STATES:
                return Gone(job.state if job else None)
            if job.attempts >= max_attempts:
                error = error_dict("ABORTED", f"gave up after {job.attempts} attempts",
                                   retryable=True)
                self._cas(conn, job_id, (QUEUED, RUNNING), FAILED,
                          {"finished_at": now, "run_token": None, "error": error})
                return Gone(FAILED)
            age = (now - _aware(job.heartbeat_at)).total_seconds() if job.heartbeat_at else 0
            return Busy(retry_in=max(0.2, lease_s - age))

    def heartbeat(self, job_id: str, token: str) -> bool:
        with self._write() as conn:
            result = conn.execute(
                update(JOBS)
                .where(JOBS.c.id == job_id, JOBS.c.run_token == token, JOBS.c.state == RUNNING)
                .values(heartbeat_at=utcnow())
            )
            return result.rowcount == 1

    def report_progress(self, job_id: str, token: str, progress: dict) -> bool:
        """Records progress; returns whether cancellation was requested. LeaseLost if not owner."""
        return self.record(job_id, token, [Pending.progress(progress)])

    def attach_artifact(
        self, job_id: str, token: str, name: str, sha256: str, media_type: str, size: int
    ) -> None:
        self.record(job_id, token, [Pending.artifact(
            {"sha256": sha256, "name": name, "media_type": media_type, "size_bytes": size})])

    def announce_model(self, job_id: str, token: str, artifact: dict, message: str) -> None:
        """Appends a MODEL_READY event naming an artifact this job already attached, so other
        services can pick the model up from `paperworks.events` by its type."""
        self.record(job_id, token, [Pending.model(artifact, message)])

    def record(self, job_id: str, token: str, pending: list[Pending]) -> bool:
        """Writes a running job's buffered events (progress, artifacts, announced models) in one
        transaction, numbered in order; returns whether cancellation was requested. LeaseLost
        if `token` no longer holds the lease: nothing is written then."""
        with self._write() as conn:
            return self._record(conn, job_id, token, pending)

    def _record(self, conn: Connection, job_id: str, token: str, pending: list[Pending],
                end: tuple[str, dict] | None = None) -> bool:
        """Writes `pending` (and, with `end` = (terminal state, column values), the state change
        after them) in one guarded update of the job row, its artifacts, then every event in
        one statement. Returns whether cancellation was requested; LeaseLost if `token` no
        longer holds the lease."""
        now = utcnow()
        values = {"heartbeat_at": now, "updated_at": now}
        progress = next((p.payload["progress"] for p in reversed(pending)
                         if p.type == PROGRESS), None)
        if progress is not None:
            values.update(
                progress_fraction=progress.get("fraction", 0.0),
                progress_stage=progress.get("stage", ""),
                progress_step=progress.get("step", 0),
                progress_total=progress.get("total_steps", 0),
                progress_message=progress.get("message", ""),
            )
        if end is not None:
            values.update(end[1], state=end[0])
        # None writes SQL NULL (a JSON column would store a JSON null from a bound None)
        shape = tuple(sorted((k, v is None) for k, v in values.items()))
        stmt = _statement(("record", shape), lambda: (
            update(JOBS)
            .where(JOBS.c.id == bindparam("b_id"), JOBS.c.run_token == bindparam("b_token"),
                   JOBS.c.state == RUNNING)
            .values(event_seq=JOBS.c.event_seq + bindparam("b_n", type_=BigInteger),
                    **{k: null() if none else bindparam(f"b_{k}", type_=JOBS.c[k].type)
                       for k, none in shape})
            .returning(*_SEQ_AND_IDENTITY, JOBS.c.cancel_requested)))
        n = len(pending) + (end is not None)
        row = conn.execute(stmt, {"b_id": job_id, "b_token": token, "b_n": n,
                                  **{f"b_{k}": v for k, v in values.items() if v is not None}}).first()
        if row is None:
            raise LeaseLost(job_id)
        first_seq = row[0] - n + 1
        dialect = _dialect(conn)
        events = []
        for seq, p in enumerate(pending, start=first_seq):
            if p.type == ARTIFACT_ADDED:
                ref = p.payload["artifact"]
                conn.execute(_statement(("blob", conn.dialect.name),
                                        lambda: dialect.insert(ARTIFACTS).on_conflict_do_nothing()),
                             {"sha256": ref["sha256"], "size_bytes": ref["size_bytes"], "created_at": now})
                # a takeover re-produces the same name: the last execution's bytes win
                conn.execute(_statement(("attach", conn.dialect.name), lambda: _attach_statement(dialect)),
                             {"job_id": job_id, "name": ref["name"],
                              **{k: ref[k] for k in ("sha256", "media_type", "size_bytes")}})
            elif p.type == MODEL_READY:
                artifact = p.payload["artifact"]
                attached = conn.execute(
                    select(JOB_ARTIFACTS.c.sha256)
                    .where(JOB_ARTIFACTS.c.job_id == job_id,
                           JOB_ARTIFACTS.c.name == artifact["name"])
                ).scalar()
                if attached != artifact["sha256"]:
                    raise ValueError(f"job {job_id} has no artifact {artifact['name']} "
                                     f"with sha256 {artifact['sha256']} to announce")
            events.append((seq, p.type, RUNNING, p.payload))
        if end is not None:
            error = end[1].get("error")
            events.append((row[0], STATE_CHANGED, end[0], {"error": error} if error else {}))
        self._insert_events(conn, job_id, row[1:4], events, now)
        return bool(row[4])

    def finish(
        self,
        job_id: str,
        token: str,
        state: str,
        result: dict | None = None,
        error: dict | None = None,
        pending: list[Pending] = (),
    ) -> bool:
        """The one write that ends an execution, with the execution's buffered events before
        its end; only the lease holder's succeeds."""
        assert state in TERMINAL_STATES
        values = {"finished_at": utcnow(), "run_token": None, "result": result, "error": error}
        if state == SUCCEEDED:
            values.update(progress_fraction=1.0)
        with self._write() as conn:
            try:
                self._record(conn, job_id, token, list(pending), end=(state, values))
            except LeaseLost:
                return False
        return True

    def release(self, job_id: str, token: str, message: str) -> bool:
        """Gives up the lease so a retry can take over at once (transient failure)."""
        with self._write() as conn:
            row = conn.execute(
                update(JOBS)
                .where(JOBS.c.id == job_id, JOBS.c.run_token == token, JOBS.c.state == RUNNING)
                .values(
                    run_token=None,
                    heartbeat_at=None,
                    event_seq=JOBS.c.event_seq + 1,
                    updated_at=utcnow(),
                )
                .returning(*_SEQ_AND_IDENTITY)
            ).first()
            if row is None:
                return False
            self._insert_event(conn, job_id, row[0], row[1:], RETRYING, RUNNING,
                               {"message": message})
            return True

    def fail_unclaimed(self, job_id: str, error: dict) -> bool:
        """Fails a job no execution owns (e.g. its kind is unknown to the worker)."""
        with self._write() as conn:
            return self._cas(
                conn, job_id, (QUEUED, RUNNING), FAILED, {"finished_at": utcnow(), "error": error}
            )

    # --- recovery -----------------------------------------------------------------

    def requeue_stranded(self, service: str, queued_for_s: float, stale_lease_s: float,
                         unhanded: Callable[[list[str]], list[str]] = list) -> list[str]:
        """Announces again the jobs whose task may have been lost, and returns their ids.

        A QUEUED job waiting `queued_for_s` that no live hand-off covers (`unhanded` picks
        those: its task died with a Redis that restarted, or its intake record with an
        in-memory Kafka), or a RUNNING job whose owner stopped heartbeating `stale_lease_s`
        ago (its task was lost after a hard kill), gets a fresh intake outbox row marked
        `requeued`, which the dispatcher hands over even if it was handed before. A duplicate
        delivery is harmless: the claim is a compare-and-set.
        """
        now = utcnow()
        waiting = and_(JOBS.c.state == QUEUED,
                       JOBS.c.updated_at < now - timedelta(seconds=queued_for_s))
        stale = and_(JOBS.c.state == RUNNING,
                     JOBS.c.heartbeat_at < now - timedelta(seconds=stale_lease_s),
                     JOBS.c.updated_at < now - timedelta(seconds=stale_lease_s))
        with self.db.read_rows() as conn:
            rows = list(conn.execute(select(JOBS.c.id, JOBS.c.kind, JOBS.c.state)
                                     .where(JOBS.c.service == service, or_(waiting, stale))
                                     .limit(500)))
        queued = set(unhanded([job_id for job_id, _, state in rows if state == QUEUED]))
        rows = [(job_id, kind) for job_id, kind, state in rows
                if state == RUNNING or job_id in queued]
        if rows:
            with self._write() as conn:
                conn.execute(insert(OUTBOX), [
                    {"service": service, "topic": jobs_topic(service), "key": job_id,
                     "payload": {"job_id": job_id, "service": service, "kind": kind,
                                 "requeued": True}, "created_at": now}
                    for job_id, kind in rows
                ])
                conn.execute(update(JOBS).where(JOBS.c.id.in_([r[0] for r in rows]))
                             .values(updated_at=now))
        return [r[0] for r in rows]

    def prune(self, service: str, sent_before_s: float, finished_before_days: float) -> tuple[int, int]:
        """Deletes the service's outbox rows published `sent_before_s` ago and, when
        `finished_before_days` > 0, the events of its jobs finished that long ago but the last
        (the terminal state change, so WatchJob still ends; the job row, its result and artifacts
        stay). Returns (outbox rows, events) deleted."""
        now = utcnow()
        with self._write() as conn:
            outbox = conn.execute(OUTBOX.delete().where(
                OUTBOX.c.service == service,
                OUTBOX.c.sent_at < now - timedelta(seconds=sent_before_s))).rowcount
            events = 0
            if finished_before_days > 0:
                old = (select(JOBS.c.id)
                       .where(JOBS.c.service == service, JOBS.c.state.in_(TERMINAL_STATES),
                              JOBS.c.finished_at < now - timedelta(days=finished_before_days)))
                last = select(JOBS.c.event_seq).where(JOBS.c.id == EVENTS.c.job_id).scalar_subquery()
                events = conn.execute(EVENTS.delete().where(
                    EVENTS.c.job_id.in_(old), EVENTS.c.seq < last)).rowcount
        return outbox, events

    # --- internals --------------------------------------------------------------

    def _cas(
        self,
        conn: Connection,
        job_id: str,
        from_states: tuple[str, ...],
        to_state: str,
        values: dict,
        token: str | None = None,
    ) -> bool:
        # None writes SQL NULL (a JSON column would store a JSON null from a bound None)
        shape = tuple(sorted((k, v is None) for k, v in values.items()))

        def build():
            conditions = [JOBS.c.id == bindparam("b_id"), JOBS.c.state.in_(from_states)]
            if token is not None:
                conditions.append(JOBS.c.run_token == bindparam("b_token"))
            return (update(JOBS).where(*conditions)
                    .values(state=bindparam("b_state", type_=String), updated_at=_at("b_now"),
                            event_seq=JOBS.c.event_seq + 1,
                            **{k: null() if none else bindparam(f"b_{k}", type_=JOBS.c[k].type)
                               for k, none in shape})
                    .returning(*_SEQ_AND_IDENTITY))

        bound = {"b_id": job_id, "b_token": token, "b_state": to_state, "b_now": utcnow(),
                 **{f"b_{k}": v for k, v in values.items() if v is not None}}
        if token is None:
            del bound["b_token"]
        row = conn.execute(_statement(("cas", from_states, token is not None, shape), build),
                           bound).first()
        if row is None:
            return False
        payload = {"error": values["error"]} if values.get("error") else {}
        self._insert_event(conn, job_id, row[0], row[1:], STATE_CHANGED, to_state, payload)
        return True

    @classmethod
    def _insert_event(cls, conn: Connection, job_id: str, seq: int, identity: tuple[str, str, str],
                      type_: str, state: str, payload: dict, now: datetime | None = None,
                      notify: bool = True) -> None:
        """Appends event `seq` (taken by the caller's guarded update). The relay publishes it
        from this row (`paperworks.shared.bus.relay`); on PostgreSQL the row records its
        transaction's id, which tells the relay when every earlier writer has finished."""
        cls._insert_events(conn, job_id, identity, [(seq, type_, state, payload)], now, notify)

    @staticmethod
    def _insert_events(conn: Connection, job_id: str, identity: tuple[str, str, str],
                       events: list[tuple[int, str, str, dict]], now: datetime | None = None,
                       notify: bool = True) -> None:
        """`_insert_event` for several (seq, type, state, payload), in one statement."""
        if not events:
            return
        now = now or utcnow()
        if notify:
            last_seq, last_type, last_state, _ = events[-1]
            final = last_type == STATE_CHANGED and last_state in TERMINAL_STATES
            conn.info.get(_WRITTEN, []).append((identity[0], job_id, last_seq, final))
        rows = [{"job_id": job_id, "service": identity[0], "seq": seq, "type": type_,
                 "state": state, "payload": payload, "created_at": now}
                for seq, type_, state, payload in events]
        conn.execute(_EVENT_INSERT_PG if conn.dialect.name == "postgresql" else _EVENT_INSERT,
                     rows if len(rows) > 1 else rows[0])


def _acquire_statement():
    """Claim: QUEUED, or RUNNING with a heartbeat older than the lease (b_stale)."""
    return (
        update(JOBS)
        .where(
            JOBS.c.id == bindparam("b_id"),
            JOBS.c.attempts < bindparam("b_max", type_=BigInteger),
            or_(
                JOBS.c.state == QUEUED,
                and_(
                    JOBS.c.state == RUNNING,
                    or_(JOBS.c.heartbeat_at.is_(None), JOBS.c.heartbeat_at < _at("b_stale")),
                ),
            ),
        )
        .values(
            state=RUNNING,
            run_token=bindparam("b_token", type_=String),
            heartbeat_at=_at("b_now"),
            attempts=JOBS.c.attempts + 1,
            started_at=func.coalesce(JOBS.c.started_at, _at("b_now")),
            updated_at=_at("b_now"),
            event_seq=JOBS.c.event_seq + 1,
        )
        .returning(*_SEQ_AND_IDENTITY, JOBS.c.attempts, JOBS.c.params)
    )


def _attach_statement(dialect):
    """Names an artifact for a job; the same name again points it at the newer bytes."""
    ins = dialect.insert(JOB_ARTIFACTS)
    kept = ("sha256", "media_type", "size_bytes")
    return ins.on_conflict_do_update(index_elements=["job_id", "name"],
                                     set_={k: ins.excluded[k] for k in kept})


def _dialect(conn: Connection):
    """The dialect module whose INSERT has ON CONFLICT (both databases the store runs on)."""
    return postgresql if conn.dialect.name == "postgresql" else sqlite


def error_dict(code: str, message: str, field: str | None = None, retryable: bool = False,
               violations: list[tuple[str, str]] | None = None) -> dict:
    violations = violations or ([(field, message)] if field else [])
    return {
        "code": code,
        "message": message,
        "field_violations": [{"field": f, "description": d} for f, d in violations],
        "retryable": retryable,
    }


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _encode_token(job: Job) -> str:
    raw = json.dumps([_aware(job.created_at).isoformat(), job.id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_token(token: str) -> tuple[datetime, str]:
    try:
        created, job_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        return datetime.fromisoformat(created), str(job_id)
    except Exception as exc:
        raise InvalidArgument("page_token", "malformed page token") from exc
