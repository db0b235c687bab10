"""Boots one service's gRPC server: its servicer, JobService, health, reflection,
auth, metrics, message limits, TLS when configured, the outbox relay, and a
graceful drain on SIGTERM.
"""
from __future__ import annotations

import logging

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


async def build_server(settings: Settings, spec: ServiceSpec, port: int | None = None):
    """Returns (server, bound port, runtime, health servicer); not yet started."""
    rt = ServiceRuntime.create(settings, spec)
    server = grpc.aio.server(
        interceptors=[MetricsInterceptor(spec.name), AuthInterceptor(rt.auth), DecodeInterceptor()],
        options=server_options(settings),
    )
    grpc_module = __import__(spec.grpc_module, fromlist=["_"])
    servicer = load(spec.servicer)(rt)
    getattr(grpc_module, f"add_{spec.grpc_service}Servicer_to_server")(servicer, server)
    jobs_pb2_grpc.add_JobServiceServicer_to_server(JobServicer(rt), server)
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
