"""Undecodable request bytes are INVALID_ARGUMENT, not gRPC's UNKNOWN.

grpc answers a request whose bytes do not parse as the method's message type
with UNKNOWN ("Unexpected DecodeError"), which a client cannot tell from a
server bug. This interceptor decodes the request itself and answers a corrupt
one with INVALID_ARGUMENT naming the expected type; the handler never runs and
nothing is written. It sits innermost, so auth and metrics see it like any call.
"""
from __future__ import annotations

import inspect

import grpc
from google.protobuf.message import DecodeError


class Undecodable:
    def __init__(self, type_name: str, error: Exception):
        self.message = f"request: not a valid {type_name} message ({error})"


def _decoder(parse):
    type_name = getattr(getattr(parse, "__self__", None), "DESCRIPTOR", None)
    type_name = type_name.full_name if type_name is not None else "request"

    def decode(raw: bytes):
        try:
            return parse(raw)
        except DecodeError as exc:
            return Undecodable(type_name, exc)

    return decode


class DecodeInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self):
        self._wrapped: dict[str, tuple] = {}  # method -> (its handler, the guarded one)

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        cached = self._wrapped.get(details.method)
        if cached is not None and cached[0] is handler:  # built once per method, not per call
            return cached[1]
        guarded = self._guarded(handler)
        if handler is not None:  # (never an unknown method's name: callers choose those)
            self._wrapped[details.method] = (handler, guarded)
        return guarded

    @staticmethod
    def _guarded(handler):
        if handler is None or handler.request_deserializer is None:
            return handler
        kwargs = dict(request_deserializer=_decoder(handler.request_deserializer),
                      response_serializer=handler.response_serializer)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(_guard_stream_in(handler.stream_unary), **kwargs)
        if handler.request_streaming:
            return handler
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(_guard(handler.unary_unary), **kwargs)
        return grpc.unary_stream_rpc_method_handler(_guard(handler.unary_stream), **kwargs)


def _guard_stream_in(inner):
    """A client stream's undecodable message aborts the call with INVALID_ARGUMENT."""

    async def call(requests, context):
        async def decoded():
            async for request in requests:
                if isinstance(request, Undecodable):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
                yield request

        return await inner(decoded(), context)

    return call


def _guard(inner):
    if inspect.isasyncgenfunction(inner):

        async def stream(request, context):
            if isinstance(request, Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            async for item in inner(request, context):
                yield item

        return stream

    async def call(request, context):
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        return await inner(request, context)

    return call
