"""Engines and sessions for SQLite and PostgreSQL from one URL.

SQLite is shared by many processes in the embedded stack: WAL mode lets readers
run beside the writer, and every writing transaction starts with BEGIN IMMEDIATE
so two writers queue on the busy timeout instead of failing on a lock upgrade;
read-only sessions (`Database.read`) begin deferred and never wait for writers.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 60_000
READ_ONLY = "paperworks_read_only"


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # let the "begin" hook below emit BEGIN
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        read_only = conn.get_execution_options().get(READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        _configure_sqlite(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


@lru_cache(maxsize=8)
def engine_for(url: str) -> Engine:
    return make_engine(url)


class Database:
    """A URL's engine plus a transactional session scope."""

    def __init__(self, url: str):
        self.url = url
        self.engine = engine_for(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._readers = sessionmaker(
            self.engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False
        )

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A read-write transaction."""
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read-only transaction (never takes SQLite's write lock)."""
        with self._readers() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()
