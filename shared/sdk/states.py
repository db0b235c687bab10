"""Job states by name, from the JobState enum of jobs.proto (JOB_STATE_QUEUED -> "QUEUED")."""
from __future__ import annotations

from paperworks.v1 import jobs_pb2

PREFIX = "JOB_STATE_"
STATE_TO_PROTO = {v.name.removeprefix(PREFIX): v.number for v in jobs_pb2.JobState.DESCRIPTOR.values
                  if v.number != 0}
PROTO_TO_STATE = {number: name for name, number in STATE_TO_PROTO.items()}
TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


def state_name(number: int) -> str:
    return PROTO_TO_STATE.get(number, "UNSPECIFIED")


def state_numbers(states) -> list[int]:
    """Names (any case) or enum numbers -> enum numbers; an unknown name is refused."""
    from paperworks.shared.errors import InvalidArgument

    out = []
    for s in states:
        if isinstance(s, str):
            if s.upper() not in STATE_TO_PROTO:
                raise InvalidArgument("states", f"unknown state {s!r} (known: {', '.join(STATE_TO_PROTO)})")
            out.append(STATE_TO_PROTO[s.upper()])
        else:
            out.append(s)
    return out
