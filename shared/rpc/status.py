"""Maps the platform's exceptions to gRPC status codes, in one place.

Errors leave the server as a google.rpc.Status with a BadRequest detail naming
each offending field (a QuotaFailure detail for a tenant at its limit), so any
client can read them, not only ours. A database that cannot be reached is
UNAVAILABLE (retryable), never INTERNAL: repeating the call is safe (a submit
repeated with its idempotency key never makes two jobs).
"""
from __future__ import annotations

import functools
import inspect
import logging

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from paperworks.shared.errors import InvalidArgument, PaperworksError, QuotaExceeded, Unavailable
from sqlalchemy import exc as sa_exc

log = logging.getLogger(__name__)


def status_code(name: str) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, name, grpc.StatusCode.UNKNOWN)


def to_rich_status(exc: PaperworksError) -> grpc.Status:
    detail = status_pb2.Status(code=code_pb2.Code.Value(exc.code), message=str(exc))
    # every error about one request field (a job id NOT_FOUND, a job not yet SUCCEEDED) names it
    # the way INVALID_ARGUMENT does, so clients read the field from one place
    violations = exc.violations if isinstance(exc, InvalidArgument) else [(exc.field, exc.message)] \
        if getattr(exc, "field", None) else []
    if violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=f, description=d)
                for f, d in violations
            ]
        )
        packed = any_pb2.Any()
        packed.Pack(bad)
        detail.details.append(packed)
    if isinstance(exc, QuotaExceeded):
        quota = error_details_pb2.QuotaFailure(
            violations=[error_details_pb2.QuotaFailure.Violation(subject=exc.subject,
                                                                 description=exc.message)]
        )
        packed = any_pb2.Any()
        packed.Pack(quota)
        detail.details.append(packed)
    return rpc_status.to_status(detail)


# The database is down, restarting or unreachable (connection refused or lost, pool
# exhausted, SQLite busy past its timeout): the caller should try again.
DATABASE_UNREACHABLE = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)


def as_platform_error(exc: Exception) -> PaperworksError:
    if isinstance(exc, DATABASE_UNREACHABLE):
        log.warning("database unreachable: %s", str(exc).splitlines()[0])
        return Unavailable("the job database is unreachable; retry the call")
    return exc


async def abort_with(context: grpc.aio.ServicerContext, exc: PaperworksError):
    await context.abort_with_status(to_rich_status(exc))


def rpc_method(func):
    """Wraps a servicer method (unary or server-streaming) so domain errors become statuses."""
    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def stream(self, request, context):
            try:
                async for item in func(self, request, context):
                    yield item
            except (PaperworksError, *DATABASE_UNREACHABLE) as exc:
                await abort_with(context, as_platform_error(exc))

        return stream

    @functools.wraps(func)
    async def unary(self, request, context):
        try:
            return await func(self, request, context)
        except (PaperworksError, *DATABASE_UNREACHABLE) as exc:
            await abort_with(context, as_platform_error(exc))

    return unary
