"""Bearer tokens → tenants. Tokens are kept only as sha256 hashes.

The interceptor rejects calls without a valid token (UNAUTHENTICATED) before
any handler runs; handlers ask `tenant_of(context)` whose jobs they may touch.
Health checks and reflection stay open so orchestrators can probe.

Service-to-service calls (a pipeline submitting its steps) present the operator's internal
credential (`PAPERWORKS_INTERNAL_TOKEN`) and name the tenant they act for in the
`x-paperworks-tenant` header, and the pipeline job in `x-paperworks-parent-job`. Both headers are
honoured only with that credential: a tenant's own token never reaches another tenant, and no
user's token is ever stored to make such calls.
"""
from __future__ import annotations

import hashlib
import hmac
import logging

import grpc
from paperworks.shared.errors import Unauthenticated

log = logging.getLogger(__name__)

OPEN_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")
DEV_TENANT = "default"
TENANT_HEADER = "x-paperworks-tenant"
PARENT_HEADER = "x-paperworks-parent-job"
MAX_HEADER_VALUE = 128


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Authenticator:
    def __init__(self, spec: str, internal_token: str = ""):
        """`spec`: comma-separated `tenant:token` or `tenant:sha256:<hex>`; empty = dev mode.
        `internal_token`: the services' own credential (empty: no internal calls)."""
        self.internal_hash = hash_token(internal_token) if internal_token else ""
        self.by_hash: dict[str, str] = {}
        for entry in filter(None, (e.strip() for e in spec.split(","))):
            tenant, sep, secret = entry.partition(":")
            if not sep or not tenant or not secret:
                raise ValueError(f"PAPERWORKS_AUTH_TOKENS entry {entry!r} is not tenant:token")
            digest = secret[7:] if secret.startswith("sha256:") else hash_token(secret)
            self.by_hash[digest] = tenant
        if not self.by_hash:
            log.warning("PAPERWORKS_AUTH_TOKENS is empty: every caller is tenant %r", DEV_TENANT)

    @property
    def enabled(self) -> bool:
        return bool(self.by_hash)

    def _bearer_hash(self, metadata) -> str | None:
        for key, value in metadata or ():
            if key == "authorization" and value.lower().startswith("bearer "):
                return hash_token(value[7:].strip())
        return None

    def _header(self, metadata, name: str) -> str:
        return next((v for k, v in metadata or () if k == name and isinstance(v, str)), "")

    def is_internal(self, metadata) -> bool:
        """Whether the call carries the internal credential."""
        digest = self._bearer_hash(metadata)
        return bool(self.internal_hash and digest and hmac.compare_digest(self.internal_hash, digest))

    def parent_for(self, metadata) -> str | None:
        """The pipeline job an internal call submits a step of; None for any other call."""
        if not self.is_internal(metadata):
            return None
        parent = self._header(metadata, PARENT_HEADER)
        return parent if 0 < len(parent) <= MAX_HEADER_VALUE else None

    def tenant_for(self, metadata) -> str | None:
        if self.internal_hash and self.is_internal(metadata):
            tenant = self._header(metadata, TENANT_HEADER)  # an internal call names its tenant
            return tenant if 0 < len(tenant) <= MAX_HEADER_VALUE else None
        if not self.enabled:
            return DEV_TENANT
        for key, value in metadata or ():
            if key == "authorization" and value.lower().startswith("bearer "):
                digest = hash_token(value[7:].strip())
                for known, tenant in self.by_hash.items():
                    if hmac.compare_digest(known, digest):
                        return tenant
        return None

    def tenant_of(self, context: grpc.aio.ServicerContext) -> str:
        tenant = self.tenant_for(context.invocation_metadata())
        if tenant is None:  # the interceptor already rejected this call
            raise Unauthenticated("unauthenticated call reached a handler")
        return tenant

    def parent_of(self, context: grpc.aio.ServicerContext) -> str | None:
        return self.parent_for(context.invocation_metadata())


class AuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, auth: Authenticator):
        self.auth = auth

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None or details.method.startswith(OPEN_PREFIXES):
            return handler
        if self.auth.tenant_for(details.invocation_metadata) is not None:
            return handler
        return _rejecting(handler)


def _rejecting(handler):
    error = Unauthenticated("missing or invalid bearer token (metadata 'authorization: Bearer <token>')")

    async def unary(request, context):
        await context.abort(grpc.StatusCode[error.code], error.message)

    async def stream(request, context):
        await context.abort(grpc.StatusCode[error.code], error.message)
        yield  # pragma: no cover - makes this an async generator

    kwargs = dict(
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary, **kwargs)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(stream, **kwargs)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary, **kwargs)
    return grpc.stream_stream_rpc_method_handler(stream, **kwargs)
