"""The database becomes unreachable for seconds while jobs run, on PostgreSQL.

Every process (server, relay, dispatcher, worker) reaches PostgreSQL through a
TCP proxy the test cuts: open connections are reset and new ones are accepted
but never answered, as with a blackholed route. During the outage clients get
UNAVAILABLE (retryable) within their deadlines, never a hang and never INTERNAL;
afterwards every job ends exactly once, with its full history and one result.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from fault.checks import retry_unavailable
from fault.tcp_proxy import TcpProxy
from paperworks.shared.db.engine import Database, engine_for
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.db.models import TERMINAL_STATES
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from paperworks.v1 import jobs_pb2
from support import TOKENS, chain, start_stack

CONNECT_TIMEOUT_S = 2  # in the database URL: how long a stalled connect may take
CALL_DEADLINE_S = 15.0


@pytest.fixture
def proxied_stack(pg_url, tmp_path):
    proxy = TcpProxy(("127.0.0.1", 5432))
    name = pg_url.rsplit("/", 1)[1]
    url = (f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/{name}"
           f"?connect_timeout={CONNECT_TIMEOUT_S}")
    stack = start_stack(tmp_path / "stack", PAPERWORKS_DATABASE_URL=url)
    yield stack, proxy, JobStore(Database(pg_url))
    stack.down()
    proxy.close()
    engine_for(url).dispose()


def test_database_outage_answers_unavailable_and_loses_nothing(proxied_stack):
    stack, proxy, store = proxied_stack
    client = Client(endpoints=stack.endpoints, token=TOKENS["alice"])
    expected = {}
    for i in range(2):
        expected[client.submit("ops", "digest", seed=400 + i, steps=40,
                               rounds_per_step=20000).id] = chain(400 + i, 40, 20000)[-1]
    for i in range(4):
        expected[client.submit("ops", "digest", seed=410 + i, steps=2,
                               rounds_per_step=10).id] = chain(410 + i, 2, 10)[-1]
    running = next(iter(expected))
    seen: list[int] = []
    watch_error: list[grpc.RpcError] = []

    def watcher():
        try:
            for ev in client.watch(running, timeout=120):
                seen.append(ev.seq)
                if ev.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS and ev.progress.step >= 2:
                    started.set()
        except grpc.RpcError as exc:
            watch_error.append(exc)

    started = threading.Event()
    watching = threading.Thread(target=watcher)
    watching.start()
    assert started.wait(120), "the long job never made progress"

    proxy.cut()
    calls = {
        "submit": lambda: client.submit("ops", "digest", seed=1, steps=1, rounds_per_step=1,
                                        timeout=CALL_DEADLINE_S),
        "get": lambda: client.get(running, timeout=CALL_DEADLINE_S),
        "watch": lambda: list(client.watch(running, timeout=CALL_DEADLINE_S)),
        "cancel": lambda: client.cancel(running),
    }
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        codes = {}
        for name, future in futures.items():
            with pytest.raises(grpc.RpcError) as exc:
                future.result()
            codes[name] = exc.value.code()
    watching.join(timeout=CALL_DEADLINE_S)
    proxy.restore()

    assert codes == dict.fromkeys(calls, grpc.StatusCode.UNAVAILABLE), codes
    assert not watching.is_alive() and watch_error[0].code() == grpc.StatusCode.UNAVAILABLE

    # after the outage: a watcher resumes where it was told UNAVAILABLE, without a gap
    resumed = retry_unavailable(lambda: [e.seq for e in client.watch(running, after_seq=seen[-1],
                                                                     timeout=180)])
    assert seen + resumed == list(range(1, len(seen) + len(resumed) + 1))
    for i in range(3):
        job = retry_unavailable(lambda i=i: client.submit("ops", "digest", seed=420 + i, steps=2,
                                                          rounds_per_step=10))
        expected[job.id] = chain(420 + i, 2, 10)[-1]

    failed = {}
    for job_id, digest in expected.items():
        done = retry_unavailable(lambda job_id=job_id: client.wait(job_id, timeout=180))
        events = store.events_after(job_id, 0)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert events[0].state == "QUEUED"
        ends = [e for e in events if e.type == "STATE_CHANGED" and e.state in TERMINAL_STATES]
        assert ends == [events[-1]], f"{job_id} ended {len(ends)} times"
        if PROTO_TO_STATE[done.state] == "SUCCEEDED":
            assert done.result["digest"] == digest
            assert len(store.artifacts(job_id)) == 1
        else:
            failed[job_id] = f"{PROTO_TO_STATE[done.state]}: {done.error.message.splitlines()[0]}"
    client.close()
    assert not failed, f"the outage failed running job(s): {failed}"
