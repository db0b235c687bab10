"""The job store: every change to a job is one guarded transaction.

Each state change is a compare-and-set (`UPDATE ... WHERE state IN (...)`), so
a redelivered or duplicated task cannot move a job that has already finished.
Each change also appends the job's next event (numbered by the job row's own
counter, so concurrent writers cannot reuse a number) and an outbox row that
the relay publishes to Kafka after the commit.

A running job is owned by the execution holding its `run_token`; the owner
heartbeats, and another execution may take over only when that heartbeat is
older than the lease. Every write by an execution names its token (fencing).
"""
from __future__ import annotations

import base64
import json
import uuid
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
from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

EVENTS_TOPIC = "paperworks.events"
DLQ_TOPIC = "paperworks.dlq"

STATE_CHANGED = "STATE_CHANGED"
PROGRESS = "PROGRESS"
ARTIFACT_ADDED = "ARTIFACT_ADDED"
CANCEL_REQUESTED = "CANCEL_REQUESTED"
RETRYING = "RETRYING"


def _update_job():
    # ORM objects loaded earlier in a session are not re-synced: every read re-selects
    return update(Job).execution_options(synchronize_session=False)


def jobs_topic(service: str) -> str:
    return f"paperworks.{service}.jobs"


class LeaseLost(Exception):
    """This execution no longer owns the job (it finished, or another took over)."""


@dataclass(frozen=True)
class Acquired:
    token: str
    attempt: int


@dataclass(frozen=True)
class Busy:
    """Another execution holds a live lease; try again after `retry_in` seconds."""

    retry_in: float


@dataclass(frozen=True)
class Gone:
    """The job is terminal or unknown: nothing to run."""

    state: str | None


class JobStore:
    def __init__(self, db: Database):
        self.db = db
        # (service, kind, tenant) never change after submit: the event payload reads them from
        # here instead of re-selecting the job row for every event a worker writes.
        self._identities: dict[str, tuple[str, str, str]] = {}

    # --- intake -----------------------------------------------------------------

    def submit(
        self,
        tenant: str,
        service: str,
        kind: str,
        params: dict,
        idempotency_key: str | None = None,
    ) -> tuple[Job, bool]:
        """Writes the QUEUED job, its first event and its outbox row; or finds the keyed job."""
        key = idempotency_key or None
        if key:
            existing = self._find_keyed(tenant, service, key)
            if existing is not None:
                return self._check_same_request(existing, kind, params), False
        job_id = f"{service}-{uuid.uuid4().hex}"
        try:
            with self.db.session() as s:
                now = utcnow()
                job = Job(
                    id=job_id,
                    tenant=tenant,
                    service=service,
                    kind=kind,
                    state=QUEUED,
                    params=params,
                    idempotency_key=key,
                    created_at=now,
                    updated_at=now,
                )
                s.add(job)
                self._identities[job_id] = (service, kind, tenant)
                s.flush()
                self._append_event(s, job_id, STATE_CHANGED, QUEUED, {})
                s.add(
                    OutboxMessage(
                        service=service,
                        topic=jobs_topic(service),
                        key=job_id,
                        payload={"job_id": job_id, "service": service, "kind": kind},
                    )
                )
                s.refresh(job)  # the row as committed (event_seq, server defaults), same transaction
        except IntegrityError:
            # A concurrent submit with the same key won the race.
            existing = self._find_keyed(tenant, service, key) if key else None
            if existing is None:
                raise
            return self._check_same_request(existing, kind, params), False
        return job, True

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

    def get(self, tenant: str | None, service: str | None, job_id: str) -> Job:
        """A job visible to `tenant` on `service`; NOT_FOUND otherwise (never 'forbidden')."""
        with self.db.read() as s:
            job = s.get(Job, job_id) if job_id else None
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

    def events_after(self, job_id: str, after_seq: int, limit: int = 500) -> list[JobEvent]:
        with self.db.read() as s:
            return list(
                s.scalars(
                    select(JobEvent)
                    .where(JobEvent.job_id == job_id, JobEvent.seq > after_seq)
                    .order_by(JobEvent.seq)
                    .limit(limit)
                )
            )

    # --- cancellation -----------------------------------------------------------

    def request_cancel(self, tenant: str, service: str, job_id: str) -> Job:
        """QUEUED jobs end CANCELLED now; RUNNING jobs are asked to stop at their next step."""
        self.get(tenant, service, job_id)
        with self.db.session() as s:
            if not self._cas(s, job_id, (QUEUED,), CANCELLED, {"finished_at": utcnow()}):
                seq = s.scalar(
                    _update_job()
                    .where(Job.id == job_id, Job.state == RUNNING, Job.cancel_requested.is_(False))
                    .values(cancel_requested=True, event_seq=Job.event_seq + 1, updated_at=utcnow())
                    .returning(Job.event_seq)
                )
                if seq is not None:
                    self._insert_event(s, job_id, seq, CANCEL_REQUESTED, RUNNING, {})
        return self.get(tenant, service, job_id)

    # --- execution --------------------------------------------------------------

    def acquire(self, job_id: str, lease_s: float, max_attempts: int) -> Acquired | Busy | Gone:
        """Claims the job for one execution: QUEUED, or RUNNING with an expired lease."""
        token = uuid.uuid4().hex
        now = utcnow()
        stale = now - timedelta(seconds=lease_s)
        with self.db.session() as s:
            job = s.get(Job, job_id)
            if job is None or job.state in TERMINAL_STATES:
                return Gone(job.state if job else None)
            if job.attempts >= max_attempts:
                self._cas(
                    s,
                    job_id,
                    (QUEUED, RUNNING),
                    FAILED,
                    {
                        "finished_at": now,
                        "run_token": None,
                        "error": error_dict(
                            "ABORTED", f"gave up after {job.attempts} attempts", retryable=True
                        ),
                    },
                )
                return Gone(FAILED)
            row = s.execute(
                _update_job()
                .where(
                    Job.id == job_id,
                    or_(
                        Job.state == QUEUED,
                        and_(
                            Job.state == RUNNING,
                            or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale),
                        ),
                    ),
                )
                .values(
                    state=RUNNING,
                    run_token=token,
                    heartbeat_at=now,
                    attempts=Job.attempts + 1,
                    started_at=func.coalesce(Job.started_at, now),
                    updated_at=now,
                    event_seq=Job.event_seq + 1,
                )
                .returning(Job.event_seq, Job.attempts)
            ).first()
            if row is None:
                age = (now - _aware(job.heartbeat_at)).total_seconds() if job.heartbeat_at else 0
                return Busy(retry_in=max(0.2, lease_s - age))
            seq, attempt = row
            message = "started" if attempt == 1 else f"taken over (attempt {attempt})"
            self._insert_event(s, job_id, seq, STATE_CHANGED, RUNNING, {"message": message})
            return Acquired(token, attempt)

    def mark_dispatched(self, job_id: str) -> None:
        with self.db.session() as s:
            s.execute(_update_job().where(Job.id == job_id).values(dispatched_at=utcnow()))

    def heartbeat(self, job_id: str, token: str) -> bool:
        with self.db.session() as s:
            result = s.execute(
                _update_job()
                .where(Job.id == job_id, Job.run_token == token, Job.state == RUNNING)
                .values(heartbeat_at=utcnow())
            )
            return result.rowcount == 1

    def report_progress(self, job_id: str, token: str, progress: dict) -> bool:
        """Records progress; returns whether cancellation was requested. LeaseLost if not owner."""
        now = utcnow()
        with self.db.session() as s:
            row = s.execute(
                _update_job()
                .where(Job.id == job_id, Job.run_token == token, Job.state == RUNNING)
                .values(
                    progress_fraction=progress.get("fraction", 0.0),
                    progress_stage=progress.get("stage", ""),
                    progress_step=progress.get("step", 0),
                    progress_total=progress.get("total_steps", 0),
                    progress_message=progress.get("message", ""),
                    heartbeat_at=now,
                    updated_at=now,
                    event_seq=Job.event_seq + 1,
                )
                .returning(Job.event_seq, Job.cancel_requested)
            ).first()
            if row is None:
                raise LeaseLost(job_id)
            seq, cancel = row
            self._insert_event(s, job_id, seq, PROGRESS, RUNNING, {"progress": progress})
            return bool(cancel)

    def attach_artifact(
        self, job_id: str, token: str, name: str, sha256: str, media_type: str, size: int
    ) -> None:
        with self.db.session() as s:
            seq = s.scalar(
                _update_job()
                .where(Job.id == job_id, Job.run_token == token, Job.state == RUNNING)
                .values(event_seq=Job.event_seq + 1, updated_at=utcnow())
                .returning(Job.event_seq)
            )
            if seq is None:
                raise LeaseLost(job_id)
            if s.get(Artifact, sha256) is None:
                s.add(Artifact(sha256=sha256, size_bytes=size))
                s.flush()
            existing = s.scalar(
                select(JobArtifact).where(JobArtifact.job_id == job_id, JobArtifact.name == name)
            )
            if existing is None:
                s.add(
                    JobArtifact(
                        job_id=job_id, name=name, sha256=sha256, media_type=media_type,
                        size_bytes=size,
                    )
                )
            else:  # a takeover re-produces the same name: the last execution's bytes win
                existing.sha256, existing.media_type, existing.size_bytes = sha256, media_type, size
            ref = {"sha256": sha256, "name": name, "media_type": media_type, "size_bytes": size}
            self._insert_event(s, job_id, seq, ARTIFACT_ADDED, RUNNING, {"artifact": ref})

    def finish(
        self,
        job_id: str,
        token: str,
        state: str,
        result: dict | None = None,
        error: dict | None = None,
    ) -> bool:
        """The one write that ends an execution; only the lease holder's succeeds."""
        assert state in TERMINAL_STATES
        with self.db.session() as s:
            values = {"finished_at": utcnow(), "run_token": None, "result": result, "error": error}
            if state == SUCCEEDED:
                values.update(progress_fraction=1.0)
            return self._cas(s, job_id, (RUNNING,), state, values, token=token)

    def release(self, job_id: str, token: str, message: str) -> bool:
        """Gives up the lease so a retry can take over at once (transient failure)."""
        with self.db.session() as s:
            seq = s.scalar(
                _update_job()
                .where(Job.id == job_id, Job.run_token == token, Job.state == RUNNING)
                .values(
                    run_token=None,
                    heartbeat_at=None,
                    event_seq=Job.event_seq + 1,
                    updated_at=utcnow(),
                )
                .returning(Job.event_seq)
            )
            if seq is None:
                return False
            self._insert_event(s, job_id, seq, RETRYING, RUNNING, {"message": message})
            return True

    def fail_unclaimed(self, job_id: str, error: dict) -> bool:
        """Fails a job no execution owns (e.g. its kind is unknown to the worker)."""
        with self.db.session() as s:
            return self._cas(
                s, job_id, (QUEUED, RUNNING), FAILED, {"finished_at": utcnow(), "error": error}
            )

    # --- recovery -----------------------------------------------------------------

    def requeue_stranded(self, service: str, queued_for_s: float, stale_lease_s: float) -> list[str]:
        """Announces again the jobs whose intake may have been lost, and returns their ids.

        A QUEUED job never handed to Celery after `queued_for_s` (its Kafka message died
        with an in-memory broker), or a RUNNING job whose owner stopped heartbeating
        `stale_lease_s` ago (its task was lost after a hard kill), gets a fresh intake
        outbox row. A duplicate delivery is harmless: the claim is a compare-and-set.
        """
        now = utcnow()
        waiting = and_(Job.state == QUEUED, Job.dispatched_at.is_(None),
                       Job.updated_at < now - timedelta(seconds=queued_for_s))
        stale = and_(Job.state == RUNNING,
                     Job.heartbeat_at < now - timedelta(seconds=stale_lease_s),
                     Job.updated_at < now - timedelta(seconds=stale_lease_s))
        query = select(Job.id, Job.kind).where(Job.service == service, or_(waiting, stale)).limit(500)
        with self.db.session() as s:
            if self.db.engine.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            rows = list(s.execute(query))
            for job_id, kind in rows:
                s.add(OutboxMessage(service=service, topic=jobs_topic(service), key=job_id,
                                    payload={"job_id": job_id, "service": service, "kind": kind,
                                             "requeued": True}))
            if rows:
                s.execute(_update_job().where(Job.id.in_([r[0] for r in rows]))
                          .values(updated_at=now))
        return [r[0] for r in rows]

    # --- internals --------------------------------------------------------------

    def _cas(
        self,
        s: Session,
        job_id: str,
        from_states: tuple[str, ...],
        to_state: str,
        values: dict,
        token: str | None = None,
    ) -> bool:
        conditions = [Job.id == job_id, Job.state.in_(from_states)]
        if token is not None:
            conditions.append(Job.run_token == token)
        seq = s.scalar(
            _update_job()
            .where(*conditions)
            .values(state=to_state, updated_at=utcnow(), event_seq=Job.event_seq + 1, **values)
            .returning(Job.event_seq)
        )
        if seq is None:
            return False
        payload = {}
        if values.get("error"):
            payload["error"] = values["error"]
        self._insert_event(s, job_id, seq, STATE_CHANGED, to_state, payload)
        return True

    def _append_event(self, s: Session, job_id: str, type_: str, state: str, payload: dict) -> None:
        seq = s.scalar(
            _update_job()
            .where(Job.id == job_id)
            .values(event_seq=Job.event_seq + 1)
            .returning(Job.event_seq)
        )
        self._insert_event(s, job_id, seq, type_, state, payload)

    def _identity(self, s: Session, job_id: str) -> tuple[str, str, str]:
        identity = self._identities.get(job_id)
        if identity is None:
            row = s.execute(select(Job.service, Job.kind, Job.tenant).where(Job.id == job_id)).one()
            identity = tuple(row)
            if len(self._identities) >= 4096:
                self._identities.clear()
            self._identities[job_id] = identity
        return identity

    def _insert_event(self, s: Session, job_id: str, seq: int, type_: str, state: str, payload: dict):
        now = utcnow()
        s.add(JobEvent(job_id=job_id, seq=seq, type=type_, state=state, payload=payload,
                       created_at=now))
        service, kind, tenant = self._identity(s, job_id)
        s.add(
            OutboxMessage(
                service=service,
                topic=EVENTS_TOPIC,
                key=job_id,
                payload={
                    "job_id": job_id,
                    "service": service,
                    "kind": kind,
                    "tenant": tenant,
                    "seq": seq,
                    "type": type_,
                    "state": state,
                    "time": now.isoformat(),
                    **payload,
                },
            )
        )


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
