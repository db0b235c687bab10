"""Intake nudges: the relay tells a service's dispatchers "a job was just published".

The embedded stack's Kafka-protocol broker (Tansu) answers a fetch that waits for
data at the fetch's deadline, not when the data arrives (measured: a message lands
a uniform 0–½ deadline late). A dispatcher that always keeps such a long poll
open sees each job late, and one that polls often burns a core's worth of idle
CPU across seven services. So a dispatcher idles on a Redis pub/sub channel (the
Celery broker's Redis, present in every deployment) and fetches from Kafka when
nudged, and every `dispatcher_idle_poll_s` regardless.

A nudge carries no data and nothing depends on it: the job still travels through
Kafka, a lost nudge costs one idle interval at most, and a dispatcher that cannot
reach Redis falls back to polling Kafka without pause.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time

import redis
from paperworks.shared.config import Settings

log = logging.getLogger(__name__)


def channel(settings: Settings, service: str) -> str:
    return f"{settings.celery_key_prefix}paperworks.{service}.intake"


def broker_redis(settings: Settings, timeout_s: float = 1.0) -> redis.Redis:
    """A client of the Celery broker's Redis (nudges, hand-off keys, event notices), with short
    timeouts: everything the platform keeps there is a hint or has a fallback."""
    return redis.Redis.from_url(settings.celery_broker_url, socket_timeout=timeout_s,
                                socket_connect_timeout=timeout_s)


class NudgeSender:
    """Used by the relay after intake messages are acknowledged by Kafka."""

    def __init__(self, settings: Settings, service: str):
        self.settings = settings
        self.channel = channel(settings, service)
        self._redis: redis.Redis | None = None
        self._warned_at = 0.0

    def send(self) -> None:
        try:
            if self._redis is None:
                self._redis = broker_redis(self.settings)
            self._redis.publish(self.channel, b"1")
        except redis.RedisError as exc:  # a hint only: dispatchers also poll on their own
            self._redis = None
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                log.warning("intake nudge on %s failed: %s (dispatchers fall back to polling)",
                            self.channel, exc)

    def close(self) -> None:
        if self._redis is not None:
            with contextlib.suppress(redis.RedisError):
                self._redis.close()
            self._redis = None


class NudgeListener:
    """A daemon thread that sets `nudged` on every nudge; `live` while it is subscribed."""

    def __init__(self, settings: Settings, service: str):
        self.settings = settings
        self.channel = channel(settings, service)
        self.nudged = threading.Event()
        self.live = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"nudges-{service}", daemon=True)

    def start(self) -> NudgeListener:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            client = broker_redis(self.settings)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self.channel)
                self.live.set()
                self.nudged.set()  # anything published while we were away: look once
                while not self._stop.is_set():
                    if pubsub.get_message(timeout=0.5) is not None:
                        self.nudged.set()
            except redis.RedisError as exc:
                if self.live.is_set():
                    log.warning("intake nudges on %s lost: %s; polling Kafka until back",
                                self.channel, exc)
                self.live.clear()
                self.nudged.set()
                self._stop.wait(1.0)
            finally:
                with contextlib.suppress(redis.RedisError):
                    pubsub.close()
                    client.close()

    def stop(self) -> None:
        self._stop.set()
