"""SQLAlchemy models: jobs, their events, artifacts, the transactional outbox and relay cursors.

The same models run on SQLite (embedded) and PostgreSQL (production); alembic
migrations in `migrations/` create them. Job state only moves through the
compare-and-set updates in `paperworks.shared.db.jobs`.
"""
from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    "QUEUED",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
)
TERMINAL_STATES = (SUCCEEDED, FAILED, CANCELLED)
ALL_STATES = (QUEUED, RUNNING, *TERMINAL_STATES)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


# SQLite has no 64-bit autoincrement BIGINT; keep ids BigInteger on PostgreSQL.
AutoId = BigInteger().with_variant(Integer, "sqlite")


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("tenant", "service", "idempotency_key", name="uq_jobs_idempotency"),
        Index("ix_jobs_tenant_service_created", "tenant", "service", "created_at"),
        Index("ix_jobs_state", "state"),
        Index("ix_jobs_parent", "parent_job_id"),
    )

    id: Mapped[str] = mapped_column(String(96), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(128))
    service: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), default=QUEUED)
    params: Mapped[dict] = mapped_column(JSON, default=dict)
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    error: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(256), nullable=True)
    progress_fraction: Mapped[float] = mapped_column(Float, default=0.0)
    progress_stage: Mapped[str] = mapped_column(String(128), default="")
    progress_step: Mapped[int] = mapped_column(BigInteger, default=0)
    progress_total: Mapped[int] = mapped_column(BigInteger, default=0)
    progress_message: Mapped[str] = mapped_column(Text, default="")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    run_token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    event_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # the pipeline job this job is a step of; set only for submits made with the internal credential
    parent_job_id: Mapped[str | None] = mapped_column(String(96), nullable=True)


class JobEvent(Base):
    """A job's numbered event. The relay publishes these rows to Kafka in commit order, read
    past its service's cursor (`RelayCursor`): no outbox row per event. `tx` is the writing
    transaction's id on PostgreSQL (whose ids do not follow commit order); SQLite's single
    writer commits ids in order, so there it stays empty. `service` is the job's, copied so
    that a relay reads its own service's events straight from one index, whatever the
    planner believes about the jobs table."""

    __tablename__ = "job_events"
    __table_args__ = (UniqueConstraint("job_id", "seq", name="uq_job_events_seq"),
                      Index("ix_job_events_service", "service", "tx", "id"))

    id: Mapped[int] = mapped_column(AutoId, primary_key=True, autoincrement=True)
    tx: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    service: Mapped[str | None] = mapped_column(String(64), nullable=True)
    job_id: Mapped[str] = mapped_column(String(96), ForeignKey("jobs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    type: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Artifact(Base):
    """A stored blob, named by the sha256 of its bytes."""

    __tablename__ = "artifacts"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JobArtifact(Base):
    """A job's named reference to an artifact; access is checked through the job's tenant."""

    __tablename__ = "job_artifacts"
    __table_args__ = (UniqueConstraint("job_id", "name", name="uq_job_artifacts_name"),)

    id: Mapped[int] = mapped_column(AutoId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(96), ForeignKey("jobs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(256))
    sha256: Mapped[str] = mapped_column(ForeignKey("artifacts.sha256"))
    media_type: Mapped[str] = mapped_column(String(128))
    size_bytes: Mapped[int] = mapped_column(BigInteger)


class Upload(Base):
    """Bytes a tenant uploaded (UploadArtifact), for its jobs to read. Another tenant never sees
    it; it expires at `expires_at` unless a job pinned it by using it."""

    __tablename__ = "uploads"
    __table_args__ = (Index("ix_uploads_expiry", "pinned", "expires_at"),)

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(256))
    media_type: Mapped[str] = mapped_column(String(128))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class OutboxMessage(Base):
    """A Kafka message written in the same transaction as the change it announces: a job's intake
    record (submit, re-announcement). Events are published from `job_events` itself."""

    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_unsent", "service", "sent_at", "id"),)

    id: Mapped[int] = mapped_column(AutoId, primary_key=True, autoincrement=True)
    service: Mapped[str] = mapped_column(String(64))
    topic: Mapped[str] = mapped_column(String(256))
    key: Mapped[str] = mapped_column(String(256))
    payload: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class RelayCursor(Base):
    """How far a service's relay has published `job_events`: the last (tx, id) it sent."""

    __tablename__ = "relay_cursors"

    service: Mapped[str] = mapped_column(String(64), primary_key=True)
    tx: Mapped[int] = mapped_column(BigInteger, default=0)
    event_id: Mapped[int] = mapped_column(BigInteger, default=0)
