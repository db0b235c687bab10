"""Platform overhead, measured against bare baselines in the same run.

- submit: SubmitDigest over gRPC (auth, validation, one DB transaction with the
  outbox row, the hand-off beside the reply) with 1 and 8 concurrent clients,
  next to a bare grpc.aio unary call on an in-process server doing nothing; each
  side after `BENCH_WARMUP_CALLS` unmeasured calls, the stack's once its first
  call's background work (the server's device report) is done. The jobs run
  while the submits go on: on one machine they share its cores.
- job: end-to-end latency of a trivial job (submit → SUCCEEDED seen through
  WatchJob: the server's hand-off → Celery → worker → DB → pushed watch), next to a
  bare Celery round trip (send a no-op task, wait for its result) on the same
  Redis broker, the two interleaved one by one once the submit benchmark's jobs
  have drained. Where the job's time goes is split into hops by the timestamps
  the stack writes anyway (job row, each event) and the client's own clock; all
  processes share one machine clock. The intake record's trip through the
  outbox relay and Kafka is off the job's path now, and shown for reference.

Writes tests/benchmarks/results/platform.json.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "platform.json"
sys.path[:0] = [str(ROOT), str(ROOT.parent)]  # its sibling bare_celery, and tests/

from bare_celery import bare_noop_task  # noqa: E402
from paperworks.ops.v1 import ops_pb2, ops_pb2_grpc  # noqa: E402
from paperworks.shared.devstack.processes import device_file  # noqa: E402
from paperworks.shared.sdk.client import Client  # noqa: E402
from support import TOKENS, start_stack, wait_for  # noqa: E402

CALLS = int(os.environ.get("BENCH_CALLS", "600"))
JOBS = int(os.environ.get("BENCH_JOBS", "40"))
WARMUP = int(os.environ.get("BENCH_WARMUP_CALLS", "100"))


def summarize(latencies: list[float], wall: float) -> dict:
    lat = sorted(latencies)
    return {
        "calls": len(lat),
        "per_s": len(lat) / wall,
        "p50_ms": 1000 * lat[len(lat) // 2],
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
    }


async def drive(call, clients: int, calls: int) -> dict:
    """`calls` calls from `clients` concurrent clients, after `WARMUP` unmeasured ones (both sides
    alike: connections, caches, the server's first-call loading are not what is compared)."""
    for _ in range(WARMUP):
        await call()
    latencies: list[float] = []

    async def one(n):
        for _ in range(n):
            t = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(one(calls // clients) for _ in range(clients)))
    return summarize(latencies, time.perf_counter() - start)


async def bare_grpc(clients: int) -> dict:
    async def noop(request, context):
        return request

    handler = grpc.method_handlers_generic_handler(
        "bench.Bare", {"Echo": grpc.unary_unary_rpc_method_handler(noop)}
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        echo = ch.unary_unary("/bench.Bare/Echo")
        result = await drive(lambda: echo(b"x"), clients, CALLS)
    await server.stop(None)
    return result


async def platform_submit(addr: str, clients: int) -> dict:
    metadata = (("authorization", f"Bearer {TOKENS['alice']}"),)
    async with grpc.aio.insecure_channel(addr) as ch:
        stub = ops_pb2_grpc.OpsServiceStub(ch)
        request = ops_pb2.SubmitDigestRequest(seed=1, steps=1, rounds_per_step=1)
        return await drive(lambda: stub.SubmitDigest(request, metadata=metadata), clients, CALLS)


def settle(stack, timeout_s: float = 120) -> None:
    """One job through the stack, then waits for what its first call set going in the background
    (the servers process works out its device report in a child that imports torch)."""
    with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as client:
        client.wait(client.submit("ops", "digest", seed=0, steps=1, rounds_per_step=1).id, timeout=60)
    if not wait_for(device_file(stack.settings, "ops.server").exists, timeout_s):
        raise TimeoutError("the server published no device report")


@contextlib.contextmanager
def bare_celery(broker_url: str) -> Iterator[Callable[[], None]]:
    """A no-op task's round trip through the same kind of Redis broker, with a real worker."""
    with bare_noop_task(broker_url) as noop:
        yield lambda: noop.delay().get(timeout=30, interval=0.001)


def drain(client: Client, timeout_s: float = 900) -> None:
    """Waits until the submit benchmark's jobs have all run: the job latency is an idle stack's."""
    deadline = time.monotonic() + timeout_s
    while client.list("ops", states=["QUEUED", "RUNNING"], page_size=1)[0]:
        if time.monotonic() > deadline:
            raise TimeoutError("the submitted jobs did not drain")
        time.sleep(0.5)


def platform_job(client: Client, seed: int) -> tuple[str, float, float, float]:
    """One trivial job: (id, wall clock at submit, at the reply, at SUCCEEDED seen)."""
    submitted = time.time()
    job = client.submit("ops", "digest", seed=seed, steps=1, rounds_per_step=1)
    replied = time.time()
    for _ in client.watch(job.id, timeout=60):
        pass
    return job.id, submitted, replied, time.time()


def trivial_jobs(client: Client, bare_round_trip: Callable[[], None]) -> tuple[dict, dict, list]:
    """Bare Celery round trips and trivial jobs, interleaved so both meet the same machine load."""
    drain(client)
    platform_job(client, 0)  # warm
    bare, ours, marks = [], [], []
    for i in range(JOBS):
        for which in (("bare", "ours") if i % 2 else ("ours", "bare")):
            t = time.perf_counter()
            if which == "bare":
                bare_round_trip()
                bare.append(time.perf_counter() - t)
            else:
                marks.append(platform_job(client, i + 1))
                ours.append(time.perf_counter() - t)
    return summarize(bare, sum(bare)), summarize(ours, sum(ours)), marks


HOPS = (
    ("submit RPC (client → reply)", "submitted", "replied"),
    ("hand-off + Celery delivery + claim (job row → RUNNING)", "row", "claimed"),
    ("worker: claim → SUCCEEDED (progress, artifact, end: one write)", "claimed", "finished"),
    ("WatchJob (SUCCEEDED committed → client saw it)", "finished", "seen"),
    ("off the path: outbox relay (job row → intake record in Kafka)", "row", "published"),
)


def _epoch(value) -> float:
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def job_hops(database_url: str, marks: list[tuple[str, float, float, float]]) -> dict:
    """Median milliseconds of each hop, from the rows the jobs left in the database."""
    engine = create_engine(database_url)
    spans: dict[str, list[float]] = {name: [] for name, _, _ in HOPS}
    with engine.connect() as conn:
        for job_id, submitted, replied, seen in marks:
            job = conn.execute(text("SELECT created_at FROM jobs WHERE id = :id"),
                               {"id": job_id}).one()
            published = conn.execute(text(
                "SELECT min(sent_at) FROM outbox WHERE key = :id AND topic LIKE '%.jobs'"),
                {"id": job_id}).scalar()
            events = {f"{t}:{s}": _epoch(at) for t, s, at in conn.execute(text(
                "SELECT type, state, created_at FROM job_events WHERE job_id = :id"), {"id": job_id})}
            at = {"submitted": submitted, "replied": replied, "row": _epoch(job.created_at),
                  "published": _epoch(published) if published else None,
                  "claimed": events["STATE_CHANGED:RUNNING"],
                  "finished": events["STATE_CHANGED:SUCCEEDED"], "seen": seen}
            for name, start, end in HOPS:
                if at[start] is not None and at[end] is not None:
                    spans[name].append(1000 * (at[end] - at[start]))
    engine.dispose()
    return {name: statistics.median(values) for name, values in spans.items()}


def main() -> dict:
    results: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                 "load_avg_1min_at_start": os.getloadavg()[0]}}
    with tempfile.TemporaryDirectory() as tmp:
        stack = start_stack(Path(tmp), PAPERWORKS_LOG_LEVEL="WARNING")
        try:
            addr = stack.endpoints["ops"]
            settle(stack)
            for clients in (1, 8):
                bare = asyncio.run(bare_grpc(clients))
                ours = asyncio.run(platform_submit(addr, clients))
                results[f"submit_{clients}_clients"] = {
                    "bare_grpc": bare, "platform": ours,
                    "p50_ratio": ours["p50_ms"] / bare["p50_ms"],
                    "throughput_ratio": ours["per_s"] / bare["per_s"],
                }
            broker = stack.state.env["PAPERWORKS_CELERY_BROKER_URL"].rsplit("/", 1)[0] + "/5"
            with bare_celery(broker) as round_trip, \
                    Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as client:
                bare, ours, marks = trivial_jobs(client, round_trip)
            results["trivial_job"] = {
                "bare_celery": bare, "platform": ours,
                "p50_ratio": ours["p50_ms"] / bare["p50_ms"],
                "hops_p50_ms": job_hops(stack.database_url, marks),
            }
        finally:
            stack.down()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1))
    return results


def table(results: dict) -> str:
    rows = ["| measure | baseline (same run) | paperworks | ratio |", "|---|---|---|---|"]
    for clients in (1, 8):
        r = results[f"submit_{clients}_clients"]
        rows.append(
            f"| submit, {clients} client(s): req/s | bare grpc.aio {r['bare_grpc']['per_s']:.0f} | "
            f"{r['platform']['per_s']:.0f} | {r['throughput_ratio']:.2f}x |")
        rows.append(
            f"| submit, {clients} client(s): p50 / p99 ms | {r['bare_grpc']['p50_ms']:.2f} / "
            f"{r['bare_grpc']['p99_ms']:.2f} | {r['platform']['p50_ms']:.2f} / "
            f"{r['platform']['p99_ms']:.2f} | {r['p50_ratio']:.1f}x (p50) |")
    j = results["trivial_job"]
    rows.append(
        f"| trivial job submit → SUCCEEDED: p50 / p99 ms | bare Celery round trip "
        f"{j['bare_celery']['p50_ms']:.1f} / {j['bare_celery']['p99_ms']:.1f} | "
        f"{j['platform']['p50_ms']:.1f} / {j['platform']['p99_ms']:.1f} | {j['p50_ratio']:.1f}x (p50) |")
    rows += ["", "| trivial job, hop | p50 ms |", "|---|---|"]
    rows += [f"| {name} | {ms:.1f} |" for name, ms in j["hops_p50_ms"].items()]
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(main()))
