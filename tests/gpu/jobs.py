"""Each service's smallest real job for `make gpu-check`: (kind, parameters) on inputs the
service makes itself (synthetic worlds, the project's tiny models), so the check needs no data
and no network. Services whose methods use no torch (ops) are left out: they own no device."""
from __future__ import annotations

from paperworks.shared.sdk.states import PROTO_TO_STATE

JOBS: dict[str, tuple[str, dict]] = {}


def state(job) -> str:
    return PROTO_TO_STATE.get(job.state, "?")
