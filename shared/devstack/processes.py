"""The long-running processes a service is made of: server, dispatcher, worker.

Each is started by `paperworks serve|dispatch|work SERVICE` (the containers'
commands, and what `paperworks up` launches; there one `serve` process and one
`dispatch` process serve every service, with a worker pool each). Each writes a
readiness file under the state dir once it can take work, for `paperworks status`
and tests.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

from paperworks.shared.config import Settings
from paperworks.shared.registry import service


def setup_logging(settings: Settings, component: str) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s {component} %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kafka").setLevel(logging.WARNING)


def ready_file(settings: Settings, component: str) -> Path:
    return settings.state_dir / "run" / f"{component}.ready"


def mark_ready(settings: Settings, component: str) -> None:
    path = ready_file(settings, component)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(os.getpid()))


def device_file(settings: Settings, component: str) -> Path:
    return settings.state_dir / "run" / f"{component}.device.json"


def publish_device(settings: Settings, component: str, ops, on_report=None) -> None:
    """In the background (a first kernel build takes a while): writes where this process runs
    methods and which kernel backend each op uses, or why none can, for `paperworks status`, and
    `on_report` hears it. A short-lived child works it out, so a server imports torch only for a
    method that needs it, a Celery worker's parent never, and its task processes, forked from it,
    with their first job; the kernels the child built stay in the on-disk cache for them."""
    _CHILD_REPORTS.put((settings, component, list(ops), on_report))
    global _reporter_pid
    with _REPORTER_LOCK:
        if _reporter_pid != os.getpid():  # threads do not survive a fork: start ours
            _reporter_pid = os.getpid()
            threading.Thread(target=_report_in_children, name="device-reports",
                             daemon=True).start()


_CHILD_REPORTS: queue.SimpleQueue = queue.SimpleQueue()
_REPORTER_LOCK = threading.Lock()
_reporter_pid: int | None = None


def _report_in_children() -> None:
    """Works out the queued device reports in short-lived children, one child at a time, each
    taking every report queued meanwhile: the first calls to several of the servers process's
    services import torch once between them, not once each at the same moment."""
    while True:
        batch = [_CHILD_REPORTS.get()]
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(_CHILD_REPORTS.get_nowait())
        code = ("import sys, json; from paperworks.shared.devstack.processes import "
                "write_device_report as w; [w(c, ops) for c, ops in json.loads(sys.argv[1])]")
        subprocess.run([sys.executable, "-c", code,
                        json.dumps([[component, ops] for _, component, ops, _ in batch])],
                       check=False)
        for settings, component, _, on_report in batch:
            if on_report is not None:
                with contextlib.suppress(OSError, ValueError):
                    report = json.loads(device_file(settings, component).read_text())
                    if "error" not in report:
                        on_report(report)


def write_device_report(component: str, ops) -> None:
    """The child's side of `publish_device` (settings from the environment it inherited)."""
    from paperworks.shared.config import get_settings
    from paperworks.shared.devices import device_report

    try:
        report = device_report(ops)
    except Exception as exc:  # noqa: BLE001 - shown by `paperworks status`, logged here
        logging.getLogger(__name__).error("%s: kernels unavailable: %s", component, exc)
        report = {"error": str(exc)[:500]}
    path = device_file(get_settings(), component)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report))


SERVERS = "servers"  # the embedded stack's one process serving every service's gRPC API


def serve(settings: Settings, names: list[str], ports: dict[str, int] | None = None) -> None:
    """The gRPC servers of the named services, each on its own port, in this process (a
    container runs one service's, on PAPERWORKS_GRPC_PORT; the embedded stack runs every
    service's, at `ports`: one ~100 MB runtime instead of one per service, each service's method
    code and torch still loaded only by its first call)."""
    from paperworks.shared.rpc import server

    component = f"{names[0]}.server" if ports is None else SERVERS
    setup_logging(settings, component)

    async def one(name: str):
        from paperworks.shared.bus.handoff import SubmitHandoff
        from paperworks.shared.rpc.metrics import publish_kernels

        spec = service(name)

        def servicer_built():  # where its methods run, once the first call loaded them
            publish_device(settings, f"{name}.server", spec.kernel_ops,
                           on_report=lambda report: publish_kernels(spec.name, report))

        srv, port, rt, health_servicer = await server.build_server(
            settings, spec, port=None if ports is None else ports[name],
            on_servicer_built=servicer_built)
        handoff = SubmitHandoff(settings, spec.name)
        rt.on_submitted = handoff.hand
        await srv.start()
        logging.getLogger(__name__).info("%s serving on port %d", name, port)
        return srv, health_servicer, handoff

    async def main():
        # blocking work (transactions, sync RPCs' methods) runs in the loop's default executor:
        # each service gets the threads its own process would have (made only when needed), so a
        # slow sync RPC of one service never leaves another's submits waiting for a thread
        from concurrent.futures import ThreadPoolExecutor

        per_service = min(32, (os.cpu_count() or 1) + 4)  # the executor's own default
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=per_service * len(names), thread_name_prefix="rpc"))
        served = [await one(name) for name in names]
        if settings.metrics_port:
            from prometheus_client import start_http_server

            start_http_server(settings.metrics_port, addr=settings.grpc_host)
        mark_ready(settings, component)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await asyncio.gather(*(health.enter_graceful_shutdown() for _, health, _ in served))
        await asyncio.gather(*(srv.stop(server.DRAIN_GRACE_S) for srv, _, _ in served))
        for _, _, handoff in served:
            handoff.stop()

    asyncio.run(main())


def dispatch(settings: Settings, names: list[str]) -> None:
    """The dispatcher and the outbox relay of each named service, one thread each, in this
    process (a container runs one service's; the embedded stack runs every service's)."""
    from paperworks.shared.bus.dispatcher import Dispatcher
    from paperworks.shared.bus.relay import OutboxRelay
    from paperworks.shared.db.engine import Database

    component = "dispatcher"
    setup_logging(settings, component)
    db = Database(settings.sqlalchemy_url)
    relays = [OutboxRelay(settings, db, name) for name in names]
    dispatchers = [Dispatcher(settings, name) for name in names]
    assigned = set()
    lock = threading.Lock()

    def on_assigned(name):
        with lock:
            assigned.add(name)
            if len(assigned) == len(names):
                mark_ready(settings, component)

    for d in dispatchers:
        d.on_assigned = lambda name=d.spec.name: on_assigned(name)

    def stop(*_):
        for d in dispatchers:
            d.stop()

    signal.signal(signal.SIGTERM, stop)
    for relay in relays:
        relay.start()
    threads = [threading.Thread(target=d.run, name=f"dispatcher-{d.spec.name}", daemon=True)
               for d in dispatchers]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):  # the main thread stays free for signals
        for t in threads:
            t.join(timeout=0.5)
    for relay in relays:
        relay.stop()


def work(settings: Settings, name: str) -> None:
    from celery.signals import worker_ready
    from paperworks.shared.tasks.app import idle_exit_autoscaler, make_celery

    setup_logging(settings, f"{name}.worker")
    app = make_celery(settings, name)
    if settings.worker_idle_exit_s:
        app.conf.worker_autoscaler = idle_exit_autoscaler(settings.worker_idle_exit_s)

    @worker_ready.connect(weak=False)
    def _ready(**_):
        publish_device(settings, f"{name}.worker", service(name).kernel_ops)
        mark_ready(settings, f"{name}.worker")

    app.worker_main(
        [
            "worker",
            "--queues", name,
            *(["--autoscale", f"{settings.worker_concurrency},0"] if settings.worker_idle_exit_s
              else ["--concurrency", str(settings.worker_concurrency)]),
            "--pool", "prefork",
            "--hostname", f"{name}@%h-{os.getpid()}",
            "--without-gossip",
            "--without-mingle",
            "--loglevel", settings.log_level.upper(),
        ]
    )
