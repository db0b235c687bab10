"""The baseline the platform benchmarks measure against: a no-op Celery task through the
same kind of Redis broker, with acks_late and prefetch 1 as the platform's workers, run by a
real prefork worker process."""
from __future__ import annotations

import contextlib
import importlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def bare_noop_task(broker_url: str, concurrency: int = 1) -> Iterator:
    """Yields the warmed-up task (call `.delay()` on it); stops its worker afterwards."""
    code = (
        "from celery import Celery\n"
        f"app = Celery('bare', broker={broker_url!r}, backend={broker_url!r})\n"
        "app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1)\n"
        "@app.task(name='bare.noop')\n"
        "def noop(): return 1\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "bareapp.py").write_text(code)
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "bareapp", "worker", "-c", str(concurrency),
             "-P", "prefork", "--without-gossip", "--without-mingle", "-l", "WARNING"],
            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        sys.path.insert(0, tmp)
        try:
            noop = importlib.import_module("bareapp").noop
            noop.delay().get(timeout=120)  # warm
            yield noop
        finally:
            sys.path.remove(tmp)
            sys.modules.pop("bareapp", None)
            worker.terminate()
            worker.wait(timeout=30)
