"""A service's dispatcher: Kafka job intake → Celery, committing offsets only after.

One consumer group per service, so dispatcher replicas split the partitions.
A message is committed once its task is in the Celery broker (or it went to the
DLQ): a crash before the commit redelivers it, and the guarded claim in the
runner makes the duplicate harmless. Jobs that are no longer QUEUED (cancelled,
or already finished by an earlier delivery) are skipped. Between bursts of
intake the dispatcher waits for the relay's nudge instead of holding a Kafka
long poll open (see `paperworks.shared.bus.nudge`).
"""
from __future__ import annotations

import json
import logging
import threading

from kafka import TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from paperworks.shared.bus.kafka import make_consumer, make_producer
from paperworks.shared.bus.nudge import NudgeListener
from paperworks.shared.config import Settings
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import DLQ_TOPIC, JobStore, jobs_topic
from paperworks.shared.db.models import QUEUED, RUNNING
from paperworks.shared.registry import service
from paperworks.shared.tasks.app import make_celery, task_name

log = logging.getLogger(__name__)

DRAIN_POLL_MS = 5  # a poll this long that finds nothing ends a burst: back to waiting for nudges
REJOIN_POLL_MS = 200


class Dispatcher:
    def __init__(self, settings: Settings, service_name: str):
        self.settings = settings
        self.spec = service(service_name)
        self.store = JobStore(Database(settings.sqlalchemy_url))
        self.celery = make_celery(settings, service_name)
        self._stop = threading.Event()
        self._dlq = None
        self.on_assigned = lambda: None  # called once the group gave us partitions

    def handle(self, raw: bytes) -> str:
        """Routes one intake message; returns what was done (for logs and tests)."""
        try:
            msg = json.loads(raw)
            job_id = msg["job_id"]
        except (ValueError, KeyError, TypeError) as exc:
            self._to_dlq(raw, f"unreadable intake message: {exc}")
            return "dlq"
        job = self.store.intake_view(job_id)
        if job is None or job.service != self.spec.name:
            self._to_dlq(raw, f"job {job_id} not found on service {self.spec.name}")
            return "dlq"
        if job.kind not in self.spec.kinds:
            self.store.fail_unclaimed(job_id, {"code": "UNIMPLEMENTED",
                                               "message": f"unknown job kind {job.kind!r}",
                                               "field_violations": [], "retryable": False})
            self._to_dlq(raw, f"unknown job kind {job.kind!r}")
            return "dlq"
        if job.state not in (QUEUED, RUNNING):
            return "skipped"
        self.celery.send_task(
            task_name(self.spec.name), args=[job_id], task_id=job_id, queue=self.spec.name
        )
        self.store.mark_dispatched(job_id)
        return "dispatched"

    def _to_dlq(self, raw: bytes, reason: str) -> None:
        log.warning("poison message to %s: %s", DLQ_TOPIC, reason)
        if self._dlq is None:
            self._dlq = make_producer(self.settings)
        body = {"service": self.spec.name, "reason": reason, "message": raw.decode(errors="replace")}
        self._dlq.send(DLQ_TOPIC, key=self.spec.name, value=json.dumps(body).encode())
        self._dlq.flush(timeout=10)

    def run(self) -> None:
        consumer = make_consumer(
            self.settings, jobs_topic(self.spec.name), f"paperworks.{self.spec.name}.dispatcher"
        )
        nudges = NudgeListener(self.settings, self.spec.name).start()
        assigned = False
        healthy = False  # last poll fine and partitions held: safe to idle between nudges
        try:
            while not self._stop.is_set():
                if healthy and nudges.live.is_set():  # idle until the relay says intake arrived
                    nudges.nudged.wait(self.settings.dispatcher_idle_poll_s)
                    nudges.nudged.clear()
                    timeout_ms = DRAIN_POLL_MS
                else:  # joining, rejoining after a broker restart, or no nudges: plain long polls,
                    timeout_ms = REJOIN_POLL_MS  # which give the group protocol time to finish
                while not self._stop.is_set():  # fetch until a poll comes back empty
                    try:
                        batches = consumer.poll(timeout_ms=timeout_ms)
                    except KafkaError as exc:  # broker restarting: poll again, never die
                        log.warning("poll failed: %s; retrying", exc)
                        healthy = False
                        self._stop.wait(0.5)
                        break
                    healthy = bool(consumer.assignment())
                    if not assigned and healthy:
                        assigned = True
                        self.on_assigned()
                    if not batches:
                        break
                    self._dispatch_batches(consumer, batches)
        finally:
            nudges.stop()
            consumer.close(autocommit=False)

    def _dispatch_batches(self, consumer, batches: dict) -> None:
        for tp, records in batches.items():
            for record in records:
                try:
                    outcome = self.handle(record.value)
                except Exception as exc:  # noqa: BLE001 - database or broker down
                    log.warning("dispatch of %s@%d failed: %s; retrying", tp, record.offset, exc)
                    consumer.seek(tp, record.offset)  # uncommitted: try it again
                    self._stop.wait(1.0)
                    break
                log.info("%s offset %d: %s", tp, record.offset, outcome)
                try:
                    consumer.commit(
                        {TopicPartition(tp.topic, tp.partition):
                         OffsetAndMetadata(record.offset + 1, "", -1)}
                    )
                except KafkaError as exc:  # group rebalanced or broker gone: redelivery
                    log.warning("commit of %s@%d failed: %s", tp, record.offset, exc)  # is harmless
                    break

    def stop(self) -> None:
        self._stop.set()
