"""The long-running processes a service is made of: server, dispatcher, worker.

Each is started by `paperworks serve|dispatch|work SERVICE` (the containers'
commands, and what `paperworks up` launches). Each writes a readiness file
under the state dir once it can take work, for `paperworks status` and tests.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
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
    methods and which kernel backend each op uses, or why none can, for `paperworks status`."""
    import json
    import threading

    from paperworks.shared.devices import device_report

    def run():
        try:
            report = device_report(ops)
            if on_report is not None:
                on_report(report)
        except Exception as exc:  # noqa: BLE001 - shown by `paperworks status`, logged here
            logging.getLogger(__name__).error("%s: kernels unavailable: %s", component, exc)
            report = {"error": str(exc)[:500]}
        path = device_file(settings, component)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report))

    threading.Thread(target=run, name="device-report", daemon=True).start()


def serve(settings: Settings, name: str) -> None:
    from paperworks.shared.rpc import server

    setup_logging(settings, f"{name}.server")
    spec = service(name)

    async def main():
        srv, port, rt, health_servicer = await server.build_server(settings, spec)
        from paperworks.shared.bus.relay import OutboxRelay

        relay = OutboxRelay(settings, rt.db, spec.name)
        relay.start()
        rt.on_submitted = relay.notify
        if settings.metrics_port:
            from prometheus_client import start_http_server

            start_http_server(settings.metrics_port, addr=settings.grpc_host)
        await srv.start()
        from paperworks.shared.rpc.metrics import publish_kernels

        publish_device(settings, f"{name}.server", spec.kernel_ops,
                       on_report=lambda report: publish_kernels(spec.name, report))
        mark_ready(settings, f"{name}.server")
        logging.getLogger(__name__).info("%s serving on port %d", name, port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await health_servicer.enter_graceful_shutdown()
        await srv.stop(server.DRAIN_GRACE_S)
        relay.stop()

    asyncio.run(main())


def dispatch(settings: Settings, name: str) -> None:
    from paperworks.shared.bus.dispatcher import Dispatcher

    setup_logging(settings, f"{name}.dispatcher")
    dispatcher = Dispatcher(settings, name)
    signal.signal(signal.SIGTERM, lambda *_: dispatcher.stop())
    dispatcher.on_assigned = lambda: mark_ready(settings, f"{name}.dispatcher")
    dispatcher.run()


def work(settings: Settings, name: str) -> None:
    from celery.signals import worker_ready
    from paperworks.shared.tasks.app import make_celery

    setup_logging(settings, f"{name}.worker")
    app = make_celery(settings, name)

    @worker_ready.connect(weak=False)
    def _ready(**_):
        publish_device(settings, f"{name}.worker", service(name).kernel_ops)
        mark_ready(settings, f"{name}.worker")

    app.worker_main(
        [
            "worker",
            "--queues", name,
            "--concurrency", str(settings.worker_concurrency),
            "--pool", "prefork",
            "--hostname", f"{name}@%h-{os.getpid()}",
            "--without-gossip",
            "--without-mingle",
            "--loglevel", settings.log_level.upper(),
        ]
    )
