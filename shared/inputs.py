"""Server paths a job may read: one guard for every service.

A request may name a file or folder on the server (a dataset, a model directory, a volume).
`PAPERWORKS_<SERVICE>_DATA_ROOT`, when set, is the only folder such paths may point into; the
refusal names the request field. (Uploads and artifact-store URIs are the other ways in.)
"""
from __future__ import annotations

import os
from pathlib import Path

from paperworks.shared.errors import InvalidArgument


def data_root_variable(service: str) -> str:
    return f"PAPERWORKS_{service.upper()}_DATA_ROOT"


def data_root(service: str) -> Path | None:
    value = os.environ.get(data_root_variable(service), "")
    return Path(value).expanduser().resolve() if value else None


def server_path(path: str, service: str, field: str) -> Path:
    """`path` resolved, refused unless it lies under the service's data root (when one is set).
    A path the OS cannot take (a NUL byte, a name too long, an unknown ~user) is refused too."""
    try:
        resolved = Path(path).expanduser().resolve()
        resolved.exists()  # raises for names the file system refuses (ENAMETOOLONG)
    except (ValueError, OSError, RuntimeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise InvalidArgument(field, f"{path[:200]!r} is not a usable path: {why}") from None
    root = data_root(service)
    if root is not None and not resolved.is_relative_to(root):
        raise InvalidArgument(field, f"must lie under {data_root_variable(service)} ({root})")
    return resolved
