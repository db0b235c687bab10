"""Prometheus metrics for every RPC: count by method and status, latency histogram."""
from __future__ import annotations

import time

import grpc
from prometheus_client import Counter, Gauge, Histogram

RPCS = Counter("paperworks_rpc_total", "RPCs handled", ["service", "method", "code"])
IN_FLIGHT = Gauge("paperworks_rpc_in_flight", "RPCs being handled", ["service", "method"])
LATENCY = Histogram(
    "paperworks_rpc_seconds",
    "RPC handling time",
    ["service", "method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

KERNEL_BACKEND = Gauge("paperworks_kernel_backend",
                       "1 for the kernel backend each op runs on in this process (reference = no "
                       "compiled kernel)", ["service", "op", "backend", "device"])


def publish_kernels(service: str, report: dict) -> None:
    """`paperworks.shared.devices.device_report` as gauges, so a fallback shows on /metrics."""
    for op, backend in report.get("kernels", {}).items():
        KERNEL_BACKEND.labels(service, op, backend, report["device"]).set(1)


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, service: str):
        self.service = service

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None or not handler.unary_unary:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        inner = handler.unary_unary

        async def timed(request, context):
            start = time.perf_counter()
            code = "OK"
            IN_FLIGHT.labels(self.service, method).inc()
            try:
                return await inner(request, context)
            except BaseException:
                code = "ERROR"
                raise
            finally:
                IN_FLIGHT.labels(self.service, method).dec()
                code = context.code().name if context.code() else code
                RPCS.labels(self.service, method, code).inc()
                LATENCY.labels(self.service, method).observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            timed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
