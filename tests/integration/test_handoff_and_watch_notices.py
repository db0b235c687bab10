"""The fast path's Redis parts over the machine's Redis: a job is handed to Celery once whoever
tries, a failed send lets the job go again, the sweeper sees which jobs no hand-off covers; and
event notices wake the watchers of their job only."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from kombu.exceptions import OperationalError
from paperworks.shared.bus.handoff import Handoff, SubmitHandoff, handed_key
from paperworks.shared.bus.watch import EventPublisher, WatchHub
from paperworks.shared.config import Settings
from paperworks.shared.devstack.stack import free_port
from paperworks.shared.tasks.app import make_celery
from support import require_system

URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def settings():
    require_system(6379, "Redis")
    prefix = f"handofftest-{uuid.uuid4().hex[:8]}:"
    yield Settings(celery_broker_url=URL, celery_key_prefix=prefix)
    client = redis.Redis.from_url(URL)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)
    client.close()


def queued(settings) -> list[str]:
    """The task ids in the ops queue, as Celery's Redis transport holds them (oldest first)."""
    client = redis.Redis.from_url(URL)
    try:
        raw = client.lrange(f"{settings.celery_key_prefix}ops", 0, -1)
    finally:
        client.close()
    return [json.loads(m)["headers"]["id"] for m in reversed(raw)]


def test_a_job_is_handed_once_whoever_tries(settings):
    server, dispatcher = Handoff(settings, "ops"), Handoff(settings, "ops")
    assert server.hand(["ops-a", "ops-b"]) == ["ops-a", "ops-b"]
    assert dispatcher.hand(["ops-b", "ops-c"]) == ["ops-c"]  # b was handed by the server
    assert queued(settings) == ["ops-a", "ops-b", "ops-c"]
    # the sweeper re-announces a stranded job with force: it is handed again
    assert dispatcher.take(["ops-a"], force=True) == ["ops-a"]
    dispatcher.send(["ops-a"])
    assert queued(settings) == ["ops-a", "ops-b", "ops-c", "ops-a"]
    ttl = redis.Redis.from_url(URL).ttl(handed_key(settings, "ops-a"))
    assert ttl > settings.celery_visibility_timeout_s  # outlives the broker's redelivery window
    server.close()
    dispatcher.close()


def test_a_failed_send_lets_the_job_go_and_the_sweeper_sees_it_unhanded(settings):
    broken = Handoff(settings, "ops")  # its hand-off keys in Redis, its Celery broker gone
    dead = settings.model_copy(update={"celery_broker_url": f"redis://127.0.0.1:{free_port()}/0"})
    broken._celery = make_celery(dead, "ops")
    broken._celery.conf.task_publish_retry = False
    with pytest.raises(OperationalError):
        broken.hand(["ops-x", "ops-z"])
    assert broken.unhanded(["ops-x", "ops-z"]) == ["ops-x", "ops-z"]
    assert queued(settings) == []
    later = Handoff(settings, "ops")
    assert later.hand(["ops-x"]) == ["ops-x"]
    assert later.unhanded(["ops-x", "ops-y"]) == ["ops-y"]
    assert queued(settings) == ["ops-x"]
    broken.close()
    later.close()


def test_the_servers_hand_off_sends_concurrent_submits_once_each_and_marks_them(settings):
    """Submits committing in many threads at once: one is handed inline, the others batched by
    the background thread; every job is queued once, and every key ends up `sent`."""
    handoff = SubmitHandoff(settings, "ops")
    ids = [f"ops-{i}" for i in range(40)]
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(handoff.hand, ids))
    finally:
        handoff.stop()  # drains its queue first
    assert sorted(queued(settings)) == sorted(ids)
    client = redis.Redis.from_url(URL)
    assert {client.get(handed_key(settings, j)) for j in ids} == {b"sent"}
    client.close()


def test_a_notice_wakes_the_watchers_of_its_job_only(settings):
    async def scenario():
        hub = WatchHub(settings, "ops")
        publish = EventPublisher(settings)
        try:
            async with hub.watching("probe") as subscribed:
                # the subscription wakes every watcher once when it is made (notices may have been
                # missed before it): wait that out, so the wakes below are the notices' own
                await asyncio.wait_for(subscribed.wait(), 10)
            assert hub.live.is_set()
            async with hub.watching("ops-1") as mine, hub.watching("ops-2") as other:
                mine.clear()
                other.clear()
                publish([("ops", "ops-1", 3, False), ("ops", "ops-1", 4, False)])  # held, then sent
                await asyncio.wait_for(mine.wait(), 5)
                await asyncio.sleep(0.2)
                assert not other.is_set()
                publish([("router", "ops-2", 1, True)])  # another service's channel
                await asyncio.sleep(0.2)
                assert not other.is_set()
        finally:
            hub.stop()

    asyncio.run(scenario())


def test_without_redis_the_hub_is_not_live_and_publishing_does_not_raise():
    settings = Settings(celery_broker_url=f"redis://127.0.0.1:{free_port()}/0")

    async def scenario():
        hub = WatchHub(settings, "ops")
        await asyncio.sleep(0.5)
        assert not hub.live.is_set()  # WatchJob polls instead
        EventPublisher(settings)([("ops", "ops-1", 1, True)])
        hub.stop()

    asyncio.run(scenario())


def test_the_relays_sweep_announces_a_job_nobody_handed_again_on_sqlite(settings, tmp_path):
    """The sweep (uploads, retention, the WAL checkpoint, then stranded jobs) runs to its end on
    SQLite: its checkpoint once raised inside a transaction, and nothing after it ran."""
    from paperworks.shared.bus.relay import OutboxRelay
    from paperworks.shared.db.engine import Database
    from paperworks.shared.db.jobs import JobStore
    from paperworks.shared.db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    upgrade(url)
    db = Database(url)
    lost, _ = JobStore(db).submit("t1", "ops", "digest", {"seed": 1, "steps": 1, "rounds_per_step": 1})
    relay = OutboxRelay(settings.model_copy(update={"database_url": url, "requeue_after_s": 0.1,
                                                    "job_lease_s": 1}), db, "ops")
    deadline = time.monotonic() + 10
    while not (requeued := relay.sweep()) and time.monotonic() < deadline:
        time.sleep(0.1)  # QUEUED for longer than requeue_after_s, and no hand-off key covers it
    assert requeued == [lost.id]
