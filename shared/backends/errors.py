"""One exception hierarchy for every backend, so services map failures to gRPC codes in one place.

Each class carries `grpc_code_name` (a `grpc.StatusCode` member name) and, where the failure is
about one input, the `field` it concerns. Backends never let transport or library exceptions
escape: callers only ever need to catch `BackendError`.
"""

from __future__ import annotations


class BackendError(Exception):
    """Base class; `retryable` says whether the same call may succeed later."""

    grpc_code_name = "INTERNAL"
    retryable = False

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidModel(BackendError):
    """The model reference or the model directory cannot be used (bad path, unsupported type)."""

    grpc_code_name = "INVALID_ARGUMENT"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"invalid model ({field}): {reason}", field=field)
        self.reason = reason


class InvalidRequest(BackendError):
    """A call's arguments are wrong (length mismatch, prompt longer than the context window)."""

    grpc_code_name = "INVALID_ARGUMENT"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"invalid request ({field}): {reason}", field=field)
        self.reason = reason


class Unsupported(BackendError):
    """The backend cannot do this operation at all (e.g. hidden states over HTTP)."""

    grpc_code_name = "FAILED_PRECONDITION"

    def __init__(self, backend: str, operation: str, reason: str) -> None:
        super().__init__(f"{backend} backend does not support {operation}: {reason}")
        self.backend = backend
        self.operation = operation
        self.reason = reason


class BackendUnavailable(BackendError):
    """The endpoint could not be reached (connection refused, reset) after all retries."""

    grpc_code_name = "UNAVAILABLE"
    retryable = True


class BackendTimeout(BackendError):
    """The endpoint did not answer within the configured timeout, after all retries."""

    grpc_code_name = "DEADLINE_EXCEEDED"
    retryable = True


_STATUS_CODES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    413: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
}


class RemoteError(BackendError):
    """The endpoint answered with an HTTP error status; `body` is the (truncated) response body."""

    def __init__(self, status: int, body: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body

    @property
    def grpc_code_name(self) -> str:  # type: ignore[override]
        if self.status >= 500:
            return "UNAVAILABLE"
        return _STATUS_CODES.get(self.status, "UNKNOWN")

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.status in (408, 429) or self.status >= 500


class MalformedResponse(BackendError):
    """The endpoint answered 2xx but the body is not the OpenAI shape we asked for."""

    grpc_code_name = "INTERNAL"

    def __init__(self, reason: str, body: str) -> None:
        super().__init__(f"malformed response: {reason}")
        self.reason = reason
        self.body = body


class MalformedOutput(BackendError):
    """The model's text is not what the caller required (e.g. JSON was asked for)."""

    grpc_code_name = "FAILED_PRECONDITION"

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(f"model output unusable: {reason}")
        self.reason = reason
        self.text = text


def platform_error(exc: BackendError, role: str = ""):
    """The platform error a backend failure becomes, in a job or a sync RPC alike:
    - a bad model or request (HTTP 400 too) → INVALID_ARGUMENT on `role.field`;
    - retryable (down, overloaded, too slow) → a TransientError the job runner retries
      (UNAVAILABLE over RPC);
    - unsupported, or a remote's lasting refusal (404 no such model, 401/403 a bad key)
      → FAILED_PRECONDITION;
    - anything else (a malformed answer) → INTERNAL.
    `role` ('target', 'judge', 'local') prefixes the field and the message."""
    from paperworks.shared import errors

    field = ".".join(p for p in (role, exc.field) if p) or None
    prefix = f"{role}: " if role else ""
    if isinstance(exc, InvalidModel | InvalidRequest) or exc.grpc_code_name == "INVALID_ARGUMENT":
        return errors.InvalidArgument(field or "model", getattr(exc, "reason", exc.message))
    if exc.retryable:
        return errors.TransientError(prefix + exc.message, field)
    if isinstance(exc, Unsupported | RemoteError) or exc.grpc_code_name == "FAILED_PRECONDITION":
        # a remote that refused for good (404 no such model, 401/403 a bad key) is a setup problem
        return errors.FailedPrecondition(prefix + exc.message, field)
    return errors.PaperworksError(prefix + exc.message, field)
