"""Engines and sessions for SQLite and PostgreSQL from one URL.

SQLite is shared by many processes in the embedded stack: WAL mode lets readers
run beside the writer, and every writing transaction starts with BEGIN IMMEDIATE
so two writers queue on the busy timeout instead of failing on a lock upgrade;
read-only sessions (`Database.read`) begin deferred and never wait for writers.
`synchronous=NORMAL` under WAL syncs the log at checkpoints, not at every
commit: a commit is durable once the process that made it returns (a crashed
process loses nothing), and a power loss can only roll the database back to an
earlier consistent commit, never corrupt it.

The job path writes through Core connections (`Database.write`): a trivial job
makes a handful of one-row transactions, and the ORM's unit of work would cost
more than the database does.

SQLite's busy handler sleeps in fixed steps (1, 2, 5, 10 … 100 ms) and is never
woken when the lock frees, so under contention a writer waits longer than the
writer before it took. Writers of the hot path therefore queue on a gate first: a
thread lock within the process and an exclusive `flock` on `<db>-writer.lock`
between processes; the kernel wakes the next waiter the moment the gate opens,
and the busy timeout is left to writers outside the gate (migrations, tools).

PostgreSQL connections get libpq TCP keepalives and a user timeout, and the
server ends a session left idle inside a transaction: a half-open connection
(a peer that vanished without a FIN) would otherwise keep its row locks and
stall every writer behind it. A URL that sets any of these keeps its own value.
Each process keeps `PAPERWORKS_DB_POOL_SIZE` (+ `DB_MAX_OVERFLOW` in bursts)
connections; behind PgBouncer in transaction mode (`PAPERWORKS_DB_PGBOUNCER`)
the idle-in-transaction timeout is the role's (ALTER ROLE ... SET), since the
startup packet carries no session settings, and statements are never prepared
on the server.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import Connection, Engine, Row, create_engine, event, make_url
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 60_000
# SQLite checkpoints its WAL inside the commit that grows it past this many pages: that commit
# (a submit, a claim: whoever comes) then copies pages into the database for 5-10 ms while the
# writer gate waits behind it; at SQLite's default (1,000) every ~150th submit paid. The relay
# checkpoints in the background instead (`Database.maybe_checkpoint`, at most once a second
# while anything commits), so the commit-time one is a backstop for a stack whose relay is down.
SQLITE_AUTOCHECKPOINT_PAGES = 10_000
CHECKPOINT_INTERVAL_S = 1.0
READ_ONLY = "paperworks_read_only"
ONE_STATEMENT = "paperworks_one_statement"
# Dead peers are noticed within about a minute; the relay holds its outbox rows for at most
# its 10 s publish timeouts, so a minute idle in a transaction is never a live session.
POSTGRES_CONNECT_DEFAULTS = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,
    "options": "-c idle_in_transaction_session_timeout=60000",
}


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # let the "begin" hook below emit BEGIN
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA wal_autocheckpoint={SQLITE_AUTOCHECKPOINT_PAGES}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        options = conn.get_execution_options()
        if options.get(ONE_STATEMENT, False):
            return  # a lone statement is its own transaction (`Database.query`)
        conn.exec_driver_sql("BEGIN" if options.get(READ_ONLY, False) else "BEGIN IMMEDIATE")


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        _configure_sqlite(engine)
        return engine
    from paperworks.shared.config import get_settings

    settings = get_settings()
    given = make_url(url).query
    defaults = {k: v for k, v in POSTGRES_CONNECT_DEFAULTS.items() if k not in given}
    if settings.db_pgbouncer:
        # transaction pooling hands each transaction any server connection: no session settings
        # in the startup packet (the role carries them), no server-side prepared statements
        defaults.pop("options", None)
        defaults["prepare_threshold"] = None
    return create_engine(url, pool_pre_ping=True, pool_size=settings.db_pool_size,
                         max_overflow=settings.db_max_overflow, connect_args=defaults)


@lru_cache(maxsize=8)
def engine_for(url: str) -> Engine:
    return make_engine(url)


class Database:
    """A URL's engine plus a transactional session scope."""

    def __init__(self, url: str):
        self.url = url
        self.engine = engine_for(url)
        database = self.engine.url.database if self.engine.dialect.name == "sqlite" else None
        self._checkpoint_lock = threading.Lock()
        self._next_checkpoint = 0.0
        self._gate = (WriterGate(f"{database}-writer.lock") if database and database != ":memory:"
                      else contextlib.nullcontext)
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
    def write(self) -> Iterator[Connection]:
        """A read-write transaction on a Core connection (commits on exit)."""
        with self._gate(), self.engine.begin() as conn:
            yield conn

    def checkpoint(self) -> None:
        """Moves SQLite's write-ahead log into the database in the background (PASSIVE: waits
        for no reader or writer), so that commits rarely pay for an automatic checkpoint."""
        if self.engine.dialect.name == "sqlite":  # never inside a transaction: SQLite refuses
            with self.engine.connect().execution_options(**{ONE_STATEMENT: True}) as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def maybe_checkpoint(self, interval_s: float = CHECKPOINT_INTERVAL_S) -> bool:
        """`checkpoint`, unless one ran in this process less than `interval_s` ago (the relay
        threads of every service ask after each batch they publish); whether it ran."""
        now = time.monotonic()
        with self._checkpoint_lock:
            if now < self._next_checkpoint:
                return False
            self._next_checkpoint = now + interval_s
        self.checkpoint()
        return True

    def commit_probe(self) -> CommitProbe | None:
        """A cheap "did anyone commit?" check, where the database has one (SQLite)."""
        return CommitProbe(self.engine) if self.engine.dialect.name == "sqlite" else None

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read-only transaction (never takes SQLite's write lock)."""
        with self._readers() as session, session.begin():
            yield session

    @contextmanager
    def read_rows(self) -> Iterator[Connection]:
        """A read-only transaction on a Core connection, for hot reads of plain rows."""
        with self.engine.connect().execution_options(**{READ_ONLY: True}) as conn, conn.begin():
            yield conn

    def query(self, statement, params: dict | None = None) -> list[Row]:
        """The rows of one read-only statement. On SQLite it runs without BEGIN and COMMIT
        around it (a lone statement reads one consistent snapshot by itself): two statements
        fewer for the hot one-query reads (WatchJob's)."""
        options = {READ_ONLY: True, ONE_STATEMENT: True}
        with self.engine.connect().execution_options(**options) as conn:
            return list(conn.execute(statement, params or {}))

    def dispose(self) -> None:
        self.engine.dispose()


class WriterGate:
    """One writer at a time across threads and processes, waiters woken when it opens.

    `flock` locks belong to an open file description, which a forked child shares with its
    parent; so each process opens the lock file itself (the pid is checked on entry)."""

    _locks: dict[str, threading.Lock] = {}

    def __init__(self, path: str):
        self.path = path
        self._thread_lock = self._locks.setdefault(path, threading.Lock())
        self._fd: int | None = None
        self._pid: int | None = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._thread_lock:
            if self._pid != os.getpid():
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                self._pid = os.getpid()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)


class CommitProbe:
    """Tells whether another connection committed since the last look, without a query.

    SQLite's `PRAGMA data_version` reads a counter kept in the shared WAL index:
    a look costs microseconds and takes no lock, so a watcher can look every few
    milliseconds and run its real query only after a commit. The probe holds one
    pooled connection for its lifetime, in autocommit (no snapshot held open).
    """

    def __init__(self, engine: Engine):
        self._conn = engine.raw_connection()
        self._last = self._version()

    def _version(self) -> int:
        cur = self._conn.cursor()
        try:
            cur.execute("PRAGMA data_version")
            return cur.fetchone()[0]
        finally:
            cur.close()

    def changed(self) -> bool:
        version = self._version()
        changed, self._last = version != self._last, version
        return changed

    def close(self) -> None:
        self._conn.close()
