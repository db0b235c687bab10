"""Pushed watches: the process that committed a job's events says so on Redis, and the
server wakes only the WatchJob streams of that job.

The database stays the source: a message carries no event, only "job J has events up
to seq S"; a woken stream reads them from the database. A lost message costs a
stream one fallback interval, and a server that cannot reach Redis polls as before
(`live` is clear). The channel is per service, in the Celery broker's Redis (present
in every deployment), so a server hears only its own service's jobs.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable

import redis
import redis.asyncio
from paperworks.shared.bus.nudge import broker_redis
from paperworks.shared.config import Settings

log = logging.getLogger(__name__)


def channel(settings: Settings, service: str) -> str:
    return f"{settings.celery_key_prefix}paperworks.{service}.events"


class EventPublisher:
    """`JobStore(on_events=...)`: after a commit, one message per job that got events.

    The caller never waits for Redis: notices go to a queue that one daemon thread per
    process (started on first use, again after a fork) sends in pipelined batches. A job's
    end is sent at once; other notices are held up to `HOLD_S` and merged per job (the
    newest seq), so a short job wakes its watchers once, at its end, instead of also in the
    middle of its run (where the wake's work would share the job's CPU), and a busy worker
    sends one batch per interval instead of one message per commit."""

    HOLD_S = 0.01

    def __init__(self, settings: Settings):
        self.settings = settings
        self._redis: redis.Redis | None = None
        self._warned_at = 0.0
        self._queue: queue.SimpleQueue[tuple[str, str, int, bool]] = queue.SimpleQueue()
        self._owner_pid: int | None = None
        self._lock = threading.Lock()

    def __call__(self, written: Iterable[tuple[str, str, int, bool]]) -> None:
        if self._owner_pid != os.getpid():  # threads do not survive a fork: start ours
            with self._lock:
                if self._owner_pid != os.getpid():
                    self._queue = queue.SimpleQueue()
                    self._redis = None
                    threading.Thread(target=self._run, name="event-notices", daemon=True).start()
                    self._owner_pid = os.getpid()
        for notice in written:
            self._queue.put(notice)

    def _run(self) -> None:
        notices = self._queue
        held: dict[tuple[str, str], int] = {}
        due: float | None = None  # when the oldest held notice goes out
        while True:
            try:
                service, job_id, seq, final = notices.get(
                    timeout=None if due is None else max(0.0, due - time.monotonic()))
            except queue.Empty:
                final = True  # held long enough
            else:
                key = (service, job_id)
                held[key] = max(seq, held.get(key, 0))
                due = due or time.monotonic() + self.HOLD_S
            if final:
                with contextlib.suppress(queue.Empty):  # whatever else came meanwhile goes too
                    while len(held) < 1000:
                        service, job_id, seq, _ = notices.get_nowait()
                        held[(service, job_id)] = max(seq, held.get((service, job_id), 0))
                self.send(held)
                held, due = {}, None

    def send(self, last: dict[tuple[str, str], int]) -> None:
        """Publishes (service, job id) -> newest seq."""
        try:
            if self._redis is None:
                self._redis = broker_redis(self.settings)
            if len(last) == 1:  # the common case: a pipeline object costs more than the command
                ((service, job_id), seq), = last.items()
                self._redis.publish(channel(self.settings, service), f"{job_id} {seq}")
                return
            pipe = self._redis.pipeline(transaction=False)
            for (service, job_id), seq in last.items():
                pipe.publish(channel(self.settings, service), f"{job_id} {seq}")
            pipe.execute()
        except redis.RedisError as exc:  # a hint only: watchers fall back to polling
            self._redis = None
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                log.warning("event notice failed: %s (watchers fall back to polling)", exc)


class WatchHub:
    """A server's listener: wakes the streams watching a job when its events are announced.

    Created in the server's event loop, which holds the subscription itself (redis.asyncio):
    a notice wakes a stream without a thread in between."""

    HEALTH_CHECK_S = 5.0  # an idle subscription is PINGed this often, so a dead one shows

    def __init__(self, settings: Settings, service: str):
        self.settings = settings
        self.channel = channel(settings, service)
        self.live = asyncio.Event()
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"watch-{service}")

    @contextlib.asynccontextmanager
    async def watching(self, job_id: str) -> AsyncIterator[asyncio.Event]:
        """An Event set whenever `job_id` gets events (and whenever the subscription was
        re-made, since notices may have been missed meanwhile). Clear it before each read."""
        event = asyncio.Event()
        self._waiters[job_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[job_id]

    def _wake(self, job_id: str | None) -> None:
        targets = self._waiters.get(job_id, ()) if job_id else [
            e for events in self._waiters.values() for e in events]
        for event in list(targets):
            event.set()

    async def _run(self) -> None:
        while True:
            client = redis.asyncio.Redis.from_url(
                self.settings.celery_broker_url, socket_connect_timeout=1.0,
                health_check_interval=self.HEALTH_CHECK_S)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                self.live.set()
                self._wake(None)  # missed while away: look
                while True:
                    message = await pubsub.get_message(timeout=self.HEALTH_CHECK_S)
                    if message is not None:
                        self._wake(message["data"].decode().partition(" ")[0])
            except (redis.RedisError, OSError) as exc:
                if self.live.is_set():
                    log.warning("event notices on %s lost: %s; watchers poll until back",
                                self.channel, exc)
                self.live.clear()
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(redis.RedisError, OSError):
                    await pubsub.aclose()
                    await client.aclose()

    def stop(self) -> None:
        self._task.cancel()
