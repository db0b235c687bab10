"""Backend failures become platform errors in one place: the code, the field path and whether the
job runner retries."""
from __future__ import annotations

import pytest
from paperworks.shared.backends import (
    BackendUnavailable,
    InvalidModel,
    InvalidRequest,
    MalformedResponse,
    RemoteError,
    Unsupported,
    platform_error,
)
from paperworks.shared.errors import TransientError


@pytest.mark.parametrize("exc, role, code, field, retried", [
    (InvalidModel("path", "not a directory"), "target", "INVALID_ARGUMENT", "target.path", False),
    (InvalidRequest("prompts", "too long"), "", "INVALID_ARGUMENT", "prompts", False),
    (Unsupported("openai", "hidden states", "over HTTP"), "local", "FAILED_PRECONDITION", "local", False),
    (BackendUnavailable("connection refused"), "judge", "UNAVAILABLE", "judge", True),
    (MalformedResponse("not JSON", "<html>"), "judge", "INTERNAL", "judge", False),
    (RemoteError(404, "{}", "model m does not exist"), "", "FAILED_PRECONDITION", None, False),
    (RemoteError(503, "", "overloaded"), "target", "UNAVAILABLE", "target", True),
])
def test_each_backend_failure_maps_to_one_platform_error(exc, role, code, field, retried):
    mapped = platform_error(exc, role)
    assert (mapped.code, mapped.field) == (code, field)
    assert isinstance(mapped, TransientError) == retried
    if code != "INVALID_ARGUMENT":
        assert mapped.message.startswith(f"{role}: " if role else "") and exc.message in mapped.message
