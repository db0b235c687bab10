"""Runs one job execution: claim the lease, heartbeat, call the handler, end exactly once.

The Celery task is a thin edge over `run_job`. At-least-once delivery (Kafka
redelivery, a requeued task after a worker died, a retry) is made exactly-once
here: the claim is a compare-and-set, and only the lease holder's final write
can end the job.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.backends import endpoints
from paperworks.shared.db.jobs import Acquired, Busy, JobStore, LeaseLost, error_dict
from paperworks.shared.db.models import CANCELLED, FAILED, SUCCEEDED
from paperworks.shared.devices import GpuPeak
from paperworks.shared.errors import PaperworksError, TransientError
from paperworks.shared.registry import ServiceSpec, load
from paperworks.shared.tasks.context import JobCancelled, JobContext
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

log = logging.getLogger(__name__)


class RetryLater(Exception):
    def __init__(self, countdown: float, reason: str):
        super().__init__(reason)
        self.countdown = countdown


@dataclass
class Outcome:
    state: str | None
    detail: str = ""


class Heartbeats:
    """One thread per worker process keeps the leases of its running jobs alive.

    Starting and joining a thread per job would cost more than a trivial job's own
    work; this thread starts with the first job of a (forked) worker process and
    renews each registered lease every `interval_s` (a third of the lease).
    """

    def __init__(self):
        self._cond = threading.Condition()
        self._jobs: dict[str, _Beat] = {}
        self._owner_pid: int | None = None
        self._waiting_until: float | None = None  # the thread's wake-up time (None: no jobs)

    @contextmanager
    def keep(self, store: JobStore, job_id: str, token: str, interval_s: float) -> Iterator[None]:
        beat = _Beat(store, token, interval_s, time.monotonic() + interval_s)
        with self._cond:
            if self._owner_pid != os.getpid():  # threads do not survive a fork: start ours
                self._owner_pid = os.getpid()
                self._waiting_until = None
                threading.Thread(target=self._run, name="lease-heartbeats", daemon=True).start()
            self._jobs[job_id] = beat
            if self._waiting_until is None or beat.due < self._waiting_until:
                self._cond.notify()  # (a thread already waking sooner finds the job then:
                # one thread switch fewer per job)
        try:
            yield
        finally:
            with self._cond:
                if self._jobs.get(job_id) is beat:
                    del self._jobs[job_id]

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [(job_id, b) for job_id, b in self._jobs.items() if b.due <= now]
                if not due:
                    next_due = min((b.due for b in self._jobs.values()), default=None)
                    self._waiting_until = next_due
                    self._cond.wait(None if next_due is None else next_due - now)
                    self._waiting_until = None
                    continue
                for _, b in due:
                    b.due = now + b.interval_s
            for job_id, b in due:
                try:
                    alive = b.store.heartbeat(job_id, b.token)
                except Exception as exc:  # noqa: BLE001 - the next progress write reports it
                    log.warning("heartbeat for %s failed: %s", job_id, exc)
                    continue
                if not alive:  # finished, or another execution took over: stop renewing
                    with self._cond:
                        if self._jobs.get(job_id) is b:
                            del self._jobs[job_id]


@dataclass
class _Beat:
    store: JobStore
    token: str
    interval_s: float
    due: float


HEARTBEATS = Heartbeats()


def run_job(
    spec: ServiceSpec,
    job_id: str,
    store: JobStore,
    artifacts: ArtifactStore,
    lease_s: float,
    max_attempts: int,
    retries_left: int,
) -> Outcome:
    try:
        claim = store.acquire(job_id, lease_s, max_attempts)
    except DBAPIError as exc:
        # The job is QUEUED and already handed to Celery: failing this task would strand it
        # (the relay's sweep re-announces only jobs never dispatched), so try again later.
        raise RetryLater(0, f"claiming job {job_id} failed: {exc}") from exc
    if isinstance(claim, Busy):
        raise RetryLater(claim.retry_in, f"job {job_id} is held by a live execution")
    if not isinstance(claim, Acquired):
        return Outcome(claim.state, "nothing to run")
    ctx = JobContext(job_id, claim.token, claim.attempt, store, artifacts)
    try:
        endpoints.TENANT.set(lambda: ctx.tenant)  # model endpoints resolve for the job's tenant
        kind = spec.kind(claim.kind)
        params = kind.params.model_validate(claim.params)
        handler = load(kind.handler)
        with HEARTBEATS.keep(store, job_id, claim.token, lease_s / 3), GpuPeak() as gpu:
            result = handler(params, ctx)
        if gpu.describe():  # the job's last progress says where its tensors were (make gpu-check)
            ctx.progress(1, 1, stage="device", message=gpu.describe())
        ended = store.finish(job_id, claim.token, SUCCEEDED, result=result or {},
                             pending=ctx.take_pending())
        return Outcome(SUCCEEDED if ended else None)
    except LeaseLost:
        return Outcome(None, "lease lost: another execution owns the job")
    except (OperationalError, InterfaceError, PoolTimeout) as exc:
        # The database is unreachable, not the job at fault: the lease runs out and a later
        # delivery takes the job over. (Not DBAPIError: that would retry handler bugs too.)
        raise RetryLater(lease_s, f"database unreachable during job {job_id}: {exc}") from exc
    except JobCancelled:
        store.finish(job_id, claim.token, CANCELLED, pending=ctx.take_pending())
        return Outcome(CANCELLED)
    except TransientError as exc:
        if retries_left > 0:
            if pending := ctx.take_pending():
                store.record(job_id, claim.token, pending)
            store.release(job_id, claim.token, f"transient failure, retrying: {exc}")
            raise RetryLater(0, str(exc)) from exc
        store.finish(job_id, claim.token, FAILED, error=_error_of(exc), pending=ctx.take_pending())
        return Outcome(FAILED, str(exc))
    except PaperworksError as exc:
        store.finish(job_id, claim.token, FAILED, error=_error_of(exc), pending=ctx.take_pending())
        return Outcome(FAILED, str(exc))
    except Exception as exc:  # noqa: BLE001 - a handler bug fails its job, not the worker
        if _is_soft_time_limit(exc):
            store.finish(job_id, claim.token, FAILED, pending=ctx.take_pending(),
                         error=error_dict("DEADLINE_EXCEEDED", "task time limit exceeded"))
            return Outcome(FAILED, "time limit")
        log.error("job %s failed:\n%s", job_id, traceback.format_exc())
        store.finish(
            job_id, claim.token, FAILED, pending=ctx.take_pending(),
            error=error_dict("INTERNAL", f"{type(exc).__name__}: {exc}"),
        )
        return Outcome(FAILED, str(exc))


def _error_of(exc: PaperworksError) -> dict:
    violations = getattr(exc, "violations", None)
    return error_dict(exc.code, exc.message, exc.field, exc.retryable, violations)


def _is_soft_time_limit(exc: BaseException) -> bool:
    from celery.exceptions import SoftTimeLimitExceeded

    return isinstance(exc, SoftTimeLimitExceeded)
