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
        self._timed: dict[str, tuple] = {}  # method -> (its handler, the timed one)

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        cached = self._timed.get(details.method)
        if cached is not None and cached[0] is handler:  # built once per method, not per call
            return cached[1]
        timed = self._wrap(handler, details.method.rsplit("/", 1)[-1])
        if handler is not None:  # (never an unknown method's name: callers choose those)
            self._timed[details.method] = (handler, timed)
        return timed

    def _wrap(self, handler, method: str):
        if handler is None or not handler.unary_unary:
            return handler
        inner = handler.unary_unary
        in_flight = IN_FLIGHT.labels(self.service, method)
        latency = LATENCY.labels(self.service, method)

        async def timed(request, context):
            start = time.perf_counter()
            code = "OK"
            in_flight.inc()
            try:
                return await inner(request, context)
            except BaseException:
                code = "ERROR"
                raise
            finally:
                in_flight.dec()
                code = context.code().name if context.code() else code
                RPCS.labels(self.service, method, code).inc()
                latency.observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            timed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
