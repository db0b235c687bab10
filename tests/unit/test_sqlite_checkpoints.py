"""SQLite's WAL is checkpointed in the background, not inside the commits on the job path:
a commit only checkpoints past a backstop far above SQLite's default, and the relay's
`Database.maybe_checkpoint` runs at most once per interval whichever thread asks."""
from __future__ import annotations

import os
import sqlite3

from paperworks.shared.db.engine import SQLITE_AUTOCHECKPOINT_PAGES, Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.db.migrate import upgrade

PARAMS = {"seed": 1, "steps": 1, "rounds_per_step": 1}


def database(tmp_path) -> tuple[Database, str]:
    path = tmp_path / "jobs.db"
    upgrade(f"sqlite:///{path}")
    return Database(f"sqlite:///{path}"), f"{path}-wal"


def test_commits_leave_the_checkpoint_to_the_background(tmp_path):
    db, wal = database(tmp_path)
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == SQLITE_AUTOCHECKPOINT_PAGES
    store = JobStore(db)
    # past SQLite's default threshold (1,000 pages): no commit checkpointed, so the log kept
    # every frame it was given and is as long as all of them
    frames_before = os.path.getsize(wal)
    for i in range(300):
        store.submit("t1", "ops", "digest", {**PARAMS, "seed": i})
    assert os.path.getsize(wal) > frames_before + 1_000 * 4096
    conn = sqlite3.connect(tmp_path / "jobs.db")
    try:
        busy, logged, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        conn.close()
    assert busy == 0 and logged > 1_000 and copied == logged  # all of it was still to copy


def test_the_background_checkpoint_copies_the_log_into_the_database(tmp_path):
    db, _ = database(tmp_path)
    store = JobStore(db)
    for i in range(50):
        store.submit("t1", "ops", "digest", {**PARAMS, "seed": i})
    before = os.path.getsize(tmp_path / "jobs.db")
    db.checkpoint()  # outside any transaction: SQLite refuses a checkpoint inside one
    assert os.path.getsize(tmp_path / "jobs.db") > before  # the jobs' pages are in the database


def test_maybe_checkpoint_runs_once_per_interval(tmp_path):
    db, _ = database(tmp_path)
    assert db.maybe_checkpoint(interval_s=3600)
    assert not db.maybe_checkpoint(interval_s=3600)  # another relay thread, within the hour
    assert db.maybe_checkpoint(interval_s=0) is False  # the hour set by the first still holds
