"""The steps' events, read from Kafka `paperworks.events` in the pipeline job's own consumer group.

Events only wake the pipeline: the database (GetJob) says what state a step is in, so an event
lost, late or read twice changes nothing, and a slow poll (the `wait` timeout) covers a broker that
is down. The group is per pipeline job (`paperworks.pipeline.<job id>`): a pipeline worker that
died resumes from the group's committed offset and sees what happened meanwhile; a new group
starts at the end of the topic (the state before it is read from the database).
"""
from __future__ import annotations

import contextlib
import json
import logging
import time

from paperworks.shared.config import Settings
from paperworks.shared.db.jobs import EVENTS_TOPIC

log = logging.getLogger(__name__)

# Tansu answers a fetch at its deadline, not on arrival: a pipeline can wait a fifth of a second
FETCH_WAIT_MS = 200


def group_of(pipeline_job_id: str) -> str:
    return f"paperworks.pipeline.{pipeline_job_id}"


class StepEvents:
    def __init__(self, settings: Settings, pipeline_job_id: str):
        self.consumer = None
        try:
            from kafka import KafkaConsumer
            from paperworks.shared.bus.kafka import bootstrap

            self.consumer = KafkaConsumer(
                EVENTS_TOPIC,
                bootstrap_servers=bootstrap(settings),
                group_id=group_of(pipeline_job_id),
                enable_auto_commit=False,
                auto_offset_reset="latest",
                session_timeout_ms=settings.kafka_session_timeout_ms,
                heartbeat_interval_ms=max(300, settings.kafka_session_timeout_ms // 3),
                fetch_max_wait_ms=FETCH_WAIT_MS,
                max_poll_records=500,
            )
        except Exception as exc:  # noqa: BLE001 - the database poll still advances the pipeline
            log.warning("pipeline %s: no Kafka events (%s); polling the database only",
                        pipeline_job_id, exc)

    def wait(self, job_ids: set[str], timeout_s: float) -> list[dict]:
        """The events of `job_ids` that arrive within `timeout_s` (returns at the first batch that
        has any); [] when none did or Kafka is unreachable (then it just sleeps)."""
        if self.consumer is None:
            time.sleep(timeout_s)
            return []
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                batches = self.consumer.poll(timeout_ms=max(1, int(left * 1000)))
            except Exception as exc:  # noqa: BLE001 - broker trouble: the poll fallback carries on
                log.warning("reading %s failed: %s", EVENTS_TOPIC, exc)
                time.sleep(max(0.0, min(left, 1.0)))
                continue
            found = []
            for records in batches.values():
                for record in records:
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        payload = json.loads(record.value)
                        if payload.get("job_id") in job_ids:
                            found.append(payload)
            if batches:
                with contextlib.suppress(Exception):
                    self.consumer.commit()
            if found:
                return found
        return []

    def close(self) -> None:
        if self.consumer is not None:
            with contextlib.suppress(Exception):
                self.consumer.close(autocommit=False)
