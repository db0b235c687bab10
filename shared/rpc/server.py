"""Boots one service's gRPC server: its servicer, JobService, health, reflection,
auth, metrics, message limits, TLS when configured, the outbox relay, and a
graceful drain on SIGTERM.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from paperworks.shared.config import Settings
from paperworks.shared.registry import ServiceSpec, load
from paperworks.shared.rpc.auth import AuthInterceptor
from paperworks.shared.rpc.decode import DecodeInterceptor
from paperworks.shared.rpc.jobs_servicer import JobServicer
from paperworks.shared.rpc.metrics import MetricsInterceptor
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.tls import server_credentials
from paperworks.v1 import jobs_pb2, jobs_pb2_grpc

log = logging.getLogger(__name__)

DRAIN_GRACE_S = 10.0


def server_options(settings: Settings) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]


def lazy_servicer(spec: ServiceSpec, rt: ServiceRuntime, grpc_module,
                  on_built: Callable[[], None] = lambda: None):
    """The service's servicer, imported and built on its first call, not at start.

    A servicer module imports the service's method code and torch (hundreds of MB); a
    server whose service nobody calls stays at the runtime's own footprint. The stand-in
    subclasses the generated base and forwards each RPC of the service's descriptor; the
    first call imports in a thread, so the event loop keeps serving meanwhile.
    """
    pb2 = __import__(spec.grpc_module.removesuffix("_grpc"), fromlist=["_"])
    base = getattr(grpc_module, f"{spec.grpc_service}Servicer")
    built: list = []
    lock = asyncio.Lock()

    async def real():
        if not built:
            async with lock:
                if not built:
                    built.append(await asyncio.to_thread(lambda: load(spec.servicer)(rt)))
                    on_built()
        return built[0]

    def forward(name: str, streaming: bool):
        if streaming:
            async def stream(self, request, context):
                async for item in getattr(await real(), name)(request, context):
                    yield item
            return stream

        async def unary(self, request, context):
            return await getattr(await real(), name)(request, context)
        return unary

    methods = {m.name: forward(m.name, m.server_streaming)
               for m in pb2.DESCRIPTOR.services_by_name[spec.grpc_service].methods}
    return type(f"Lazy{base.__name__}", (base,), methods)()


async def build_server(settings: Settings, spec: ServiceSpec, port: int | None = None,
                       on_servicer_built: Callable[[], None] = lambda: None):
    """Returns (server, bound port, runtime, health servicer); not yet started.
    `on_servicer_built` runs once the first call has loaded the service's servicer."""
    rt = ServiceRuntime.create(settings, spec)
    server = grpc.aio.server(
        interceptors=[MetricsInterceptor(spec.name), AuthInterceptor(rt.auth), DecodeInterceptor()],
        options=server_options(settings),
    )
    grpc_module = __import__(spec.grpc_module, fromlist=["_"])
    servicer = lazy_servicer(spec, rt, grpc_module, on_servicer_built)
    getattr(grpc_module, f"add_{spec.grpc_service}Servicer_to_server")(servicer, server)
    jobs_pb2_grpc.add_JobServiceServicer_to_server(JobServicer(rt, servicer), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    pb2 = __import__(spec.grpc_module.removesuffix("_grpc"), fromlist=["_"])
    full_name = pb2.DESCRIPTOR.services_by_name[spec.grpc_service].full_name
    names = (
        full_name,
        jobs_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
    )
    reflection.enable_server_reflection(names, server)
    address = f"{settings.grpc_host}:{settings.grpc_port if port is None else port}"
    credentials = server_credentials(settings)
    if credentials is None:
        bound = server.add_insecure_port(address)
    else:
        bound = server.add_secure_port(address, credentials)
    if bound == 0:
        raise OSError(f"cannot bind {settings.grpc_host}:{settings.grpc_port}: port in use")
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set(full_name, health_pb2.HealthCheckResponse.SERVING)
    return server, bound, rt, health_servicer
