"""One exception hierarchy for the whole platform.

Domain code raises these; the rpc runtime maps them to gRPC status codes in one
place (`paperworks.shared.rpc.status`), and the job runner stores them as a
job's ErrorDetail. Each carries the gRPC code name, so the mapping is data.
"""
from __future__ import annotations


class PaperworksError(Exception):
    code = "INTERNAL"
    retryable = False

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class InvalidArgument(PaperworksError):
    code = "INVALID_ARGUMENT"

    def __init__(self, field: str, message: str, violations: list[tuple[str, str]] | None = None):
        super().__init__(message, field)
        self.violations = violations or [(field, message)]


class NotFound(PaperworksError):
    code = "NOT_FOUND"


class FailedPrecondition(PaperworksError):
    code = "FAILED_PRECONDITION"


class Unauthenticated(PaperworksError):
    code = "UNAUTHENTICATED"


class ResourceExhausted(PaperworksError):
    code = "RESOURCE_EXHAUSTED"


class QuotaExceeded(ResourceExhausted):
    """A tenant is at one of its limits; `subject` names who, for a QuotaFailure detail."""

    def __init__(self, subject: str, message: str):
        super().__init__(message)
        self.subject = subject


class DeadlineExceeded(PaperworksError):
    code = "DEADLINE_EXCEEDED"
    retryable = True


class Unavailable(PaperworksError):
    """A dependency is down or overloaded; the same call may succeed later."""

    code = "UNAVAILABLE"
    retryable = True


class TransientError(Unavailable):
    """Raised by a job handler when trying again later may succeed (a remote is down): the runner
    retries the job instead of failing it."""


class Cancelled(PaperworksError):
    code = "CANCELLED"


def violations_from_pydantic(exc, prefix: str = "") -> InvalidArgument:
    """Turns a pydantic ValidationError into InvalidArgument naming every field path."""
    violations = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "request"
        violations.append((f"{prefix}{path}", err["msg"]))
    field, message = violations[0]
    return InvalidArgument(field, message, violations)
