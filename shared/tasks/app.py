"""The Celery app of one service's worker pool: one queue per service, late acks.

`acks_late` + `reject_on_worker_lost` mean a task whose worker dies is delivered
again; `run_job` makes that redelivery safe. Results live in the database, so
Celery's result backend is off.
"""
from __future__ import annotations

import logging

from celery import Celery
from celery.signals import worker_process_init
from paperworks.shared.artifacts import open_artifact_store
from paperworks.shared.bus.watch import EventPublisher
from paperworks.shared.config import Settings
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.registry import service
from paperworks.shared.tasks.runner import RetryLater, run_job

log = logging.getLogger(__name__)


def task_name(service_name: str) -> str:
    return f"paperworks.{service_name}.run_job"


def broker_options(settings: Settings) -> dict:
    options = {
        "visibility_timeout": settings.celery_visibility_timeout_s,
        "unacked_restore_interval": 2,
        "unacked_restore_throttle": 1,
    }
    if settings.celery_key_prefix:
        options["global_keyprefix"] = settings.celery_key_prefix
    return options


def idle_exit_autoscaler(idle_s: float) -> type:
    """Celery's autoscaler with its scale-down delay set: `paperworks work` starts a pool with no
    task process (`--autoscale N,0`), the first job forks one, and one left `idle_s` without a
    job exits (its memory, with the models and torch it loaded, goes back to the machine)."""
    from celery.worker.autoscale import Autoscaler  # the worker's module: servers never load it

    class IdleExitAutoscaler(Autoscaler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "keepalive": idle_s})

    return IdleExitAutoscaler


def make_celery(settings: Settings, service_name: str) -> Celery:
    """The app for `service_name`; the dispatcher uses the same app to send tasks."""
    app = Celery(f"paperworks-{service_name}", broker=settings.celery_broker_url)
    app.conf.update(
        task_default_queue=service_name,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        worker_concurrency=settings.worker_concurrency,
        task_soft_time_limit=settings.task_soft_time_limit_s,
        task_time_limit=settings.task_time_limit_s,
        broker_transport_options=broker_options(settings),
        broker_connection_retry_on_startup=True,
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    spec = service(service_name)
    db = Database(settings.sqlalchemy_url)
    store = JobStore(db, on_events=EventPublisher(settings))  # wakes the job's watchers
    artifacts = open_artifact_store(settings)

    @worker_process_init.connect(weak=False)
    def _fresh_connections(**_):
        db.engine.dispose(close=False)  # never share the parent's pooled connections

    @app.task(name=task_name(service_name), bind=True, max_retries=None)
    def run(self, job_id: str):
        transient_left = settings.transient_retries - self.request.retries
        try:
            outcome = run_job(
                spec,
                job_id,
                store,
                artifacts,
                lease_s=settings.job_lease_s,
                max_attempts=settings.max_attempts,
                retries_left=transient_left,
            )
        except RetryLater as wait:
            backoff = wait.countdown or min(30.0, 0.5 * 2 ** max(0, self.request.retries))
            raise self.retry(countdown=backoff, exc=None) from None
        log.info("job %s: %s %s", job_id, outcome.state, outcome.detail)
        return outcome.state

    return app
