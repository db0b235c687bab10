"""kafka-python clients configured once for the whole platform.

Producers wait for all in-sync replicas (acks=all) and retry; consumers never
auto-commit: the dispatcher commits an offset only after the job is in Celery.
The clients' own metrics are off (nothing reads them; per record they cost more
than building the record), and record checksums use the `crc32c` C extension
(kafka-python falls back to pure Python without it).
"""
from __future__ import annotations

import contextlib
import logging
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError
from paperworks.shared.config import Settings
from paperworks.shared.db.jobs import DLQ_TOPIC, EVENTS_TOPIC, jobs_topic

log = logging.getLogger(__name__)

# Tansu answers a fetch that waits for data at its deadline, not on arrival, so fetches wait
# little: dispatchers poll only when nudged (see paperworks.shared.bus.nudge), not in a loop.
FETCH_MAX_WAIT_MS = 2


def bootstrap(settings: Settings) -> list[str]:
    return [s.strip() for s in settings.kafka_bootstrap_servers.split(",") if s.strip()]


def make_producer(settings: Settings) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=bootstrap(settings),
        acks="all",
        retries=5,
        linger_ms=2,
        key_serializer=lambda k: k.encode(),
        value_serializer=lambda v: v,
        request_timeout_ms=10_000,
        max_block_ms=10_000,
        metrics_enabled=False,
    )


def make_consumer(settings: Settings, topic: str, group_id: str) -> KafkaConsumer:
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap(settings),
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=settings.kafka_session_timeout_ms,
        heartbeat_interval_ms=max(300, settings.kafka_session_timeout_ms // 3),
        max_poll_records=50,
        fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        metrics_enabled=False,
    )


def ensure_topics(settings: Settings, services: list[str], attempts: int = 20) -> None:
    """Creates the jobs topic of every service, the events topic and the DLQ, explicitly."""
    wanted = [NewTopic(jobs_topic(s), settings.kafka_partitions, 1) for s in services]
    wanted += [NewTopic(EVENTS_TOPIC, settings.kafka_partitions, 1), NewTopic(DLQ_TOPIC, 1, 1)]
    last: Exception | None = None
    for _ in range(attempts):
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap(settings), request_timeout_ms=5000)
        except KafkaError as exc:
            last = exc
            time.sleep(0.25)
            continue
        try:
            existing = set(admin.list_topics())
            missing = [t for t in wanted if t.name not in existing]
            if missing:
                with contextlib.suppress(TopicAlreadyExistsError):  # a concurrent creator won
                    admin.create_topics(missing)
            return
        finally:
            admin.close()
    raise RuntimeError(f"Kafka at {settings.kafka_bootstrap_servers} unreachable: {last}")
