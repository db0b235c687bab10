"""Intake nudges over the machine's Redis: a send wakes a listener on the same service only,
and a listener that cannot reach Redis says so (the dispatcher then polls Kafka instead)."""
from __future__ import annotations

import uuid

from paperworks.shared.bus.nudge import NudgeListener, NudgeSender
from paperworks.shared.config import Settings
from paperworks.shared.devstack.stack import free_port
from support import require_system


def _settings(url: str) -> Settings:
    return Settings(celery_broker_url=url, celery_key_prefix=f"nudgetest-{uuid.uuid4().hex[:8]}:")


def test_a_nudge_wakes_the_listener_of_its_service_only():
    require_system(6379, "Redis")
    settings = _settings("redis://127.0.0.1:6379/0")
    mine = NudgeListener(settings, "router").start()
    other = NudgeListener(settings, "quantizer").start()
    sender = NudgeSender(settings, "router")
    try:
        assert mine.live.wait(5) and other.live.wait(5)
        mine.nudged.clear()
        other.nudged.clear()
        sender.send()
        assert mine.nudged.wait(5)
        assert not other.nudged.wait(0.3)
    finally:
        sender.close()
        mine.stop()
        other.stop()


def test_without_redis_the_listener_is_not_live_and_the_sender_does_not_raise():
    settings = _settings(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    listener = NudgeListener(settings, "router").start()
    try:
        assert listener.nudged.wait(5)  # a failed subscribe wakes the dispatcher to poll Kafka
        assert not listener.live.is_set()
        NudgeSender(settings, "router").send()
    finally:
        listener.stop()
