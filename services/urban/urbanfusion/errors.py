"""The method's one error: an input it cannot use, named by the request field it came from.

A ValueError, not a platform error: the service's job handlers and gRPC edge report it as
INVALID_ARGUMENT on `field` (`paperworks.services.urban.spec.invalid_arguments`).
"""
from __future__ import annotations


class FieldError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
