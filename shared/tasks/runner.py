"""Runs one job execution: claim the lease, heartbeat, call the handler, end exactly once.

The Celery task is a thin edge over `run_job`. At-least-once delivery (Kafka
redelivery, a requeued task after a worker died, a retry) is made exactly-once
here: the claim is a compare-and-set, and only the lease holder's final write
can end the job.
"""
from __future__ import annotations

import logging
import threading
import traceback
from dataclasses import dataclass

from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.db.jobs import Acquired, Busy, JobStore, LeaseLost, error_dict
from paperworks.shared.db.models import CANCELLED, FAILED, SUCCEEDED
from paperworks.shared.errors import PaperworksError
from paperworks.shared.registry import ServiceSpec, load
from paperworks.shared.tasks.context import JobCancelled, JobContext

log = logging.getLogger(__name__)


class TransientError(PaperworksError):
    """Raised by a handler when trying again later may succeed (a remote is down)."""

    code = "UNAVAILABLE"
    retryable = True


class RetryLater(Exception):
    def __init__(self, countdown: float, reason: str):
        super().__init__(reason)
        self.countdown = countdown


@dataclass
class Outcome:
    state: str | None
    detail: str = ""


class Heartbeat:
    """Keeps the lease alive while a handler is inside one long step."""

    def __init__(self, store: JobStore, job_id: str, token: str, interval_s: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(store, job_id, token, interval_s), daemon=True
        )

    def _run(self, store: JobStore, job_id: str, token: str, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                if not store.heartbeat(job_id, token):
                    return
            except Exception as exc:  # noqa: BLE001 - the next progress write reports it
                log.warning("heartbeat for %s failed: %s", job_id, exc)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)


def run_job(
    spec: ServiceSpec,
    job_id: str,
    store: JobStore,
    artifacts: ArtifactStore,
    lease_s: float,
    max_attempts: int,
    retries_left: int,
) -> Outcome:
    claim = store.acquire(job_id, lease_s, max_attempts)
    if isinstance(claim, Busy):
        raise RetryLater(claim.retry_in, f"job {job_id} is held by a live execution")
    if not isinstance(claim, Acquired):
        return Outcome(claim.state, "nothing to run")
    job = store.get(None, spec.name, job_id)
    ctx = JobContext(job_id, claim.token, claim.attempt, store, artifacts)
    try:
        kind = spec.kind(job.kind)
        params = kind.params.model_validate(job.params)
        handler = load(kind.handler)
        with Heartbeat(store, job_id, claim.token, lease_s / 3):
            result = handler(params, ctx)
        ended = store.finish(job_id, claim.token, SUCCEEDED, result=result or {})
        return Outcome(SUCCEEDED if ended else None)
    except LeaseLost:
        return Outcome(None, "lease lost: another execution owns the job")
    except JobCancelled:
        store.finish(job_id, claim.token, CANCELLED)
        return Outcome(CANCELLED)
    except TransientError as exc:
        if retries_left > 0:
            store.release(job_id, claim.token, f"transient failure, retrying: {exc}")
            raise RetryLater(0, str(exc)) from exc
        store.finish(job_id, claim.token, FAILED, error=_error_of(exc))
        return Outcome(FAILED, str(exc))
    except PaperworksError as exc:
        store.finish(job_id, claim.token, FAILED, error=_error_of(exc))
        return Outcome(FAILED, str(exc))
    except Exception as exc:  # noqa: BLE001 - a handler bug fails its job, not the worker
        if _is_soft_time_limit(exc):
            store.finish(job_id, claim.token, FAILED,
                         error=error_dict("DEADLINE_EXCEEDED", "task time limit exceeded"))
            return Outcome(FAILED, "time limit")
        log.error("job %s failed:\n%s", job_id, traceback.format_exc())
        store.finish(
            job_id, claim.token, FAILED,
            error=error_dict("INTERNAL", f"{type(exc).__name__}: {exc}"),
        )
        return Outcome(FAILED, str(exc))


def _error_of(exc: PaperworksError) -> dict:
    violations = getattr(exc, "violations", None)
    return error_dict(exc.code, exc.message, exc.field, exc.retryable, violations)


def _is_soft_time_limit(exc: BaseException) -> bool:
    from celery.exceptions import SoftTimeLimitExceeded

    return isinstance(exc, SoftTimeLimitExceeded)
