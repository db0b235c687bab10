"""Per-tenant job quotas, checked before a submit writes anything.

A tenant may hold at most PAPERWORKS_MAX_QUEUED_JOBS_PER_TENANT jobs QUEUED and
PAPERWORKS_MAX_ACTIVE_JOBS_PER_TENANT jobs QUEUED or RUNNING in one service; a
submit beyond either is RESOURCE_EXHAUSTED (with a google.rpc.QuotaFailure
detail) and writes nothing. A repeated idempotency key is not a new job, so it
is answered even at the limit. The count and the insert are two transactions:
the server serializes one tenant's submits (see `ServiceRuntime.submit`), so one
replica never overshoots; N replicas can overshoot by at most N - 1 jobs.
"""
from __future__ import annotations

from paperworks.shared.db.engine import Database
from paperworks.shared.db.models import QUEUED, RUNNING, Job
from paperworks.shared.errors import QuotaExceeded
from sqlalchemy import func, select


def active_counts(db: Database, tenant: str, service: str) -> dict[str, int]:
    """{QUEUED: n, RUNNING: m} for one tenant's jobs in one service."""
    with db.read() as s:
        rows = s.execute(
            select(Job.state, func.count())
            .where(Job.tenant == tenant, Job.service == service, Job.state.in_((QUEUED, RUNNING)))
            .group_by(Job.state)
        ).all()
    counts = {QUEUED: 0, RUNNING: 0}
    counts.update({state: n for state, n in rows})
    return counts


def is_resubmission(db: Database, tenant: str, service: str, key: str | None) -> bool:
    if not key:
        return False
    with db.read() as s:
        return s.scalar(
            select(Job.id).where(Job.tenant == tenant, Job.service == service,
                                 Job.idempotency_key == key)
        ) is not None


def check_submit(db: Database, tenant: str, service: str, key: str | None,
                 max_queued: int, max_active: int) -> None:
    """Raises QuotaExceeded when a new job would put the tenant over a limit (0: none)."""
    if not (max_queued or max_active) or is_resubmission(db, tenant, service, key):
        return
    counts = active_counts(db, tenant, service)
    subject = f"tenant:{tenant}/service:{service}"
    if max_queued and counts[QUEUED] >= max_queued:
        raise QuotaExceeded(subject, f"tenant {tenant!r} has {counts[QUEUED]} queued {service} jobs, "
                            f"the limit (PAPERWORKS_MAX_QUEUED_JOBS_PER_TENANT={max_queued}); "
                            "retry once some have started")
    active = counts[QUEUED] + counts[RUNNING]
    if max_active and active >= max_active:
        raise QuotaExceeded(subject, f"tenant {tenant!r} has {active} queued or running {service} "
                            f"jobs, the limit (PAPERWORKS_MAX_ACTIVE_JOBS_PER_TENANT={max_active}); "
                            "retry once some have finished")
