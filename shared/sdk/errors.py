"""What a rejected call says, decoded on the client from the standard google.rpc error model."""
from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2

DETAILS_KEY = "grpc-status-details-bin"


def field_violations(error: grpc.RpcError) -> list[tuple[str, str]]:
    """The (field, description) pairs of a rejected call (its google.rpc.BadRequest detail)."""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    raw = next((value for key, value in trailers or () if key == DETAILS_KEY), None)
    if raw is None:
        return []
    status = status_pb2.Status.FromString(raw)
    found = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            found += [(v.field, v.description) for v in bad.field_violations]
    return found
