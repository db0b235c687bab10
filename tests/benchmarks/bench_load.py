"""Load: 10,000 jobs from 16 concurrent clients on the embedded stack.

Every job must reach a terminal state, none lost (each submitted id is in the
database) and none duplicated (one job per submit, one terminal event per job,
one result artifact per job). Measured: submit throughput and p50/p99 submit
latency over gRPC, time to drain (last submit → last job terminal), and the peak
resident memory of each process of the stack, sampled every 0.25 s, and the CPU time
each used per job (where a job's cost goes; on PostgreSQL the server's processes too).

Baselines from the same run: a bare grpc.aio unary call with the same 16 clients
(what gRPC alone costs on this machine), and a bare Celery drain of no-op tasks
through the same kind of Redis broker with the same worker concurrency (what the
task queue alone costs).

`BENCH_LOAD_BACKEND=postgres` runs the same on the machine's PostgreSQL (a fresh
database) and Redis (a fresh key prefix) instead of the embedded SQLite and Redis.

Writes tests/benchmarks/results/load.json (a PostgreSQL run goes under its "postgres" key).
"""
from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import psutil

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "load.json"
sys.path[:0] = [str(ROOT), str(ROOT.parent)]  # its sibling bare_celery, and tests/

from bare_celery import bare_noop_task  # noqa: E402
from paperworks.shared.db.engine import Database  # noqa: E402
from paperworks.shared.db.models import (  # noqa: E402
    TERMINAL_STATES,
    Job,
    JobArtifact,
    JobEvent,
)
from paperworks.shared.sdk.client import AsyncClient  # noqa: E402
from sqlalchemy import func, select  # noqa: E402
from support import TOKENS, start_stack  # noqa: E402

JOBS = int(os.environ.get("BENCH_LOAD_JOBS", "10000"))
CLIENTS = int(os.environ.get("BENCH_LOAD_CLIENTS", "16"))
CONCURRENCY = int(os.environ.get("BENCH_LOAD_WORKER_CONCURRENCY", "2"))
BARE_TASKS = int(os.environ.get("BENCH_LOAD_BARE_TASKS", "2000"))
DRAIN_TIMEOUT_S = float(os.environ.get("BENCH_LOAD_DRAIN_TIMEOUT_S", "3600"))
BACKEND = os.environ.get("BENCH_LOAD_BACKEND", "embedded")


def admin_engine():
    """The machine's PostgreSQL, outside any transaction (CREATE / DROP DATABASE)."""
    from sqlalchemy import create_engine

    return create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
                         isolation_level="AUTOCOMMIT")


def system_backends() -> dict[str, str]:
    """A fresh database on the machine's PostgreSQL and a fresh key prefix on its Redis."""
    import uuid

    from sqlalchemy import text

    name = f"bench_load_{uuid.uuid4().hex[:8]}"
    admin = admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return {"PAPERWORKS_DATABASE_URL": f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}",
            "PAPERWORKS_CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
            "PAPERWORKS_CELERY_KEY_PREFIX": f"{name}:"}


def drop_database(url: str) -> None:
    """The run's database goes once measured (10,000 jobs' rows on the machine's server)."""
    from paperworks.shared.db.engine import engine_for
    from sqlalchemy import text

    engine_for(url).dispose()
    admin = admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)'))
    admin.dispose()


def percentiles(latencies: list[float]) -> dict:
    lat = sorted(latencies)
    return {"p50_ms": 1000 * lat[len(lat) // 2],
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


class ProcessWatch:
    """Per stack component (a worker pool: its parent and task processes summed): peak RSS,
    sampled every `interval_s`, and CPU seconds used while watched, which say where a job's
    cost goes. `extra` names processes outside the stack by name (the machine's PostgreSQL)."""

    def __init__(self, pids: dict[str, int], extra: dict[str, str] | None = None,
                 interval_s: float = 0.25):
        self.pids = {**pids, "bench client": os.getpid()}
        self.extra = extra or {}
        self.peak_mb = dict.fromkeys(self.pids, 0.0)
        self._cpu: dict[str, dict[int, float]] = {n: {} for n in [*self.pids, *self.extra]}
        self._cpu_start: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)

    def _tree(self, name: str) -> list[psutil.Process]:
        if name in self.extra:
            return [p for p in psutil.process_iter(["name"]) if p.info["name"] == self.extra[name]]
        try:
            proc = psutil.Process(self.pids[name])
            return [proc] + (proc.children(recursive=True) if proc.pid != os.getpid() else [])
        except psutil.Error:
            return []

    def _sample(self, first: bool = False) -> None:
        for name in self._cpu:
            rss = 0.0
            for proc in self._tree(name):
                try:
                    t = proc.cpu_times()
                    rss += proc.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                self._cpu[name][proc.pid] = t.user + t.system
                if first:
                    self._cpu_start[proc.pid] = t.user + t.system
            if name in self.peak_mb:
                self.peak_mb[name] = max(self.peak_mb[name], rss)

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self._sample()

    def cpu_s(self) -> dict[str, float]:
        """CPU seconds per component while watched (a process that ended counts until its last
        sample)."""
        return {name: sum(t - self._cpu_start.get(pid, 0.0) for pid, t in pids.items())
                for name, pids in self._cpu.items()}

    def __enter__(self):
        self._sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


async def submit_all(endpoints: dict[str, str]) -> tuple[list[str], list[float], float, int]:
    latencies: list[float] = []
    ids: list[str] = []
    retried = 0

    async def one_client(n: int, seed0: int):
        nonlocal retried
        async with AsyncClient(endpoints=endpoints, token=TOKENS["alice"]) as client:
            for i in range(n):
                start = time.perf_counter()
                while True:
                    try:
                        job = await client.submit("ops", "digest", seed=seed0 + i, steps=1,
                                                  rounds_per_step=1)
                        break
                    except grpc.aio.AioRpcError as exc:  # retryable only; anything else fails the run
                        if exc.code() != grpc.StatusCode.UNAVAILABLE:
                            raise
                        retried += 1
                        await asyncio.sleep(0.1)
                latencies.append(time.perf_counter() - start)
                ids.append(job.id)

    per_client = [JOBS // CLIENTS + (1 if c < JOBS % CLIENTS else 0) for c in range(CLIENTS)]
    start = time.perf_counter()
    await asyncio.gather(*(one_client(n, 1_000_000 * c) for c, n in enumerate(per_client)))
    return ids, latencies, time.perf_counter() - start, retried


def drain(db: Database, total: int) -> tuple[float, list[tuple[float, int]]]:
    """Seconds until every job is terminal, with (t, terminal count) samples."""
    start = time.perf_counter()
    samples = []
    while True:
        with db.read() as s:
            done = s.scalar(select(func.count()).select_from(Job).where(Job.state.in_(TERMINAL_STATES)))
        samples.append((time.perf_counter() - start, done))
        if done >= total:
            return time.perf_counter() - start, samples
        if time.perf_counter() - start > DRAIN_TIMEOUT_S:
            raise RuntimeError(f"only {done}/{total} jobs terminal after {DRAIN_TIMEOUT_S:.0f}s")
        time.sleep(0.5)


def audit(db: Database, ids: list[str]) -> dict:
    """None lost, none duplicated, each ended once with one result."""
    with db.read() as s:
        states = dict(s.execute(select(Job.state, func.count()).group_by(Job.state)).all())
        stored = set(s.scalars(select(Job.id)))
        ends = dict(s.execute(
            select(JobEvent.job_id, func.count())
            .where(JobEvent.type == "STATE_CHANGED", JobEvent.state.in_(TERMINAL_STATES))
            .group_by(JobEvent.job_id)).all())
        artifacts = dict(s.execute(select(JobArtifact.job_id, func.count())
                                   .group_by(JobArtifact.job_id)).all())
        attempts = dict(s.execute(select(Job.attempts, func.count()).group_by(Job.attempts)).all())
    submitted = set(ids)
    return {
        "submitted": len(ids),
        "distinct_ids": len(submitted),
        "in_database": len(stored),
        "lost": len(submitted - stored),
        "unexpected": len(stored - submitted),
        "states": states,
        "ended_not_exactly_once": sum(1 for i in submitted if ends.get(i, 0) != 1),
        "result_artifacts_not_one": sum(1 for i in submitted if artifacts.get(i, 0) != 1),
        "attempts": {str(k): v for k, v in sorted(attempts.items())},
    }


async def bare_grpc(calls: int, clients: int) -> dict:
    async def noop(request, context):
        return request

    handler = grpc.method_handlers_generic_handler(
        "bench.Bare", {"Echo": grpc.unary_unary_rpc_method_handler(noop)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    latencies: list[float] = []

    async def one():
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            echo = ch.unary_unary("/bench.Bare/Echo")
            for _ in range(calls // clients):
                t = time.perf_counter()
                await echo(b"x")
                latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(clients)))
    wall = time.perf_counter() - start
    await server.stop(None)
    return {"calls": len(latencies), "per_s": len(latencies) / wall, **percentiles(latencies)}


def bare_celery_drain(broker_url: str, tasks: int) -> dict:
    """No-op tasks through Redis with the same worker concurrency: sent, then drained."""
    with bare_noop_task(broker_url, CONCURRENCY) as noop:
        start = time.perf_counter()
        results = [noop.delay() for _ in range(tasks)]
        for r in results:
            r.get(timeout=600, interval=0.01)
        wall = time.perf_counter() - start
        return {"tasks": tasks, "seconds": wall, "per_s": tasks / wall}


def main() -> dict:
    results: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                     "jobs": JOBS, "clients": CLIENTS, "worker_concurrency": CONCURRENCY,
                     "backend": BACKEND}
    backends = system_backends() if BACKEND == "postgres" else {}
    with tempfile.TemporaryDirectory() as tmp:
        stack = start_stack(Path(tmp), **backends,
                            PAPERWORKS_LOG_LEVEL="WARNING",  # production timings
                            PAPERWORKS_WORKER_CONCURRENCY=str(CONCURRENCY),
                            PAPERWORKS_JOB_LEASE_S="10", PAPERWORKS_REQUEUE_AFTER_S="60",
                            PAPERWORKS_CELERY_VISIBILITY_TIMEOUT_S="3600")
        try:
            db = Database(stack.database_url)
            pids = {name: comp.pid for name, comp in stack.state.components.items()}
            extra = {"postgresql": "postgres"} if BACKEND == "postgres" else {}
            with ProcessWatch(pids, extra) as watch:
                ids, latencies, submit_s, retried = asyncio.run(submit_all(stack.endpoints))
                drain_s, samples = drain(db, JOBS)
            results["submit"] = {"seconds": submit_s, "per_s": JOBS / submit_s,
                                 "unavailable_retries": retried, **percentiles(latencies)}
            results["drain"] = {"after_last_submit_s": drain_s, "total_s": submit_s + drain_s,
                                "jobs_per_s": JOBS / (submit_s + drain_s),
                                "progress": samples[:: max(1, len(samples) // 40)]}
            results["peak_rss_mb"] = watch.peak_mb
            results["cpu_ms_per_job"] = {name: 1000 * sec / JOBS
                                         for name, sec in watch.cpu_s().items()}
            results["audit"] = audit(db, ids)
            broker_url = (backends.get("PAPERWORKS_CELERY_BROKER_URL")
                          or stack.state.env["PAPERWORKS_CELERY_BROKER_URL"])
            broker = broker_url.rsplit("/", 1)[0] + "/5"
            results["bare_celery"] = bare_celery_drain(broker, BARE_TASKS)
        finally:
            stack.down()
            if backends:
                drop_database(backends["PAPERWORKS_DATABASE_URL"])
    results["bare_grpc"] = asyncio.run(bare_grpc(JOBS, CLIENTS))
    a = results["audit"]
    assert a["lost"] == 0 and a["unexpected"] == 0 and a["distinct_ids"] == JOBS, a
    assert a["ended_not_exactly_once"] == 0 and a["result_artifacts_not_one"] == 0, a
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if BACKEND == "postgres":  # beside the embedded run's figures
        results = {**(json.loads(RESULTS.read_text()) if RESULTS.exists() else {}),
                   "postgres": results}
    else:
        old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        results = {**results, **({"postgres": old["postgres"]} if "postgres" in old else {})}
    RESULTS.write_text(json.dumps(results, indent=1))
    return results


def table(results: dict) -> str:
    text = run_table(results)
    if "postgres" in results:
        text += "\n\nThe same on PostgreSQL and Redis (the machine's services):\n\n"
        text += run_table(results["postgres"])
    return text


def run_table(results: dict) -> str:
    s, d, a = results["submit"], results["drain"], results["audit"]
    g, c = results["bare_grpc"], results["bare_celery"]
    rows = [
        f"{results['jobs']} trivial ops jobs from {results['clients']} concurrent clients, worker "
        f"concurrency {results['worker_concurrency']}: {a['states'].get('SUCCEEDED', 0)} SUCCEEDED, "
        f"{a['lost']} lost, {a['ended_not_exactly_once']} not ended exactly once, "
        f"{a['result_artifacts_not_one']} without exactly one result.",
        "",
        "| measure | baseline (same run) | paperworks | ratio |",
        "|---|---|---|---|",
        f"| submit throughput, req/s | bare grpc.aio {g['per_s']:.0f} | {s['per_s']:.0f} | "
        f"{s['per_s'] / g['per_s']:.2f}x |",
        f"| submit latency p50 / p99 ms | {g['p50_ms']:.2f} / {g['p99_ms']:.2f} | "
        f"{s['p50_ms']:.1f} / {s['p99_ms']:.1f} | {s['p50_ms'] / g['p50_ms']:.1f}x (p50) |",
        f"| jobs run to the end, per s (submit → all terminal) | bare Celery no-op drain "
        f"{c['per_s']:.0f} | {d['jobs_per_s']:.0f} | {d['jobs_per_s'] / c['per_s']:.2f}x |",
        f"| time to drain after the last submit | | {d['after_last_submit_s']:.1f} s | |",
        "",
        "| process | peak RSS MB | CPU ms per job |",
        "|---|---|---|",
    ]
    cpu = results.get("cpu_ms_per_job", {})
    for name in [*results["peak_rss_mb"], *(n for n in cpu if n not in results["peak_rss_mb"])]:
        mb = results["peak_rss_mb"].get(name)
        rows.append(f"| {name} | {'' if mb is None else f'{mb:.0f}'} | "
                    f"{'' if name not in cpu else f'{cpu[name]:.2f}'} |")
    if cpu:
        total = sum(v for k, v in cpu.items() if k != "bench client")
        rows.append(f"| all but the bench client | | {total:.2f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(main()))
