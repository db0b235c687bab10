"""Calls to the other services on a tenant's behalf: the operator's internal credential
(`PAPERWORKS_INTERNAL_TOKEN`) with the tenant, and for a step its pipeline job, named in metadata
(`paperworks.shared.rpc.auth`). The user's own token is never kept: a pipeline worker holds only
the credential the operator gave every service.
"""
from __future__ import annotations

import grpc
from google.protobuf import struct_pb2
from paperworks.shared.config import Settings, get_settings
from paperworks.shared.errors import FailedPrecondition
from paperworks.shared.rpc.auth import PARENT_HEADER, TENANT_HEADER
from paperworks.shared.sdk.client import Client
from paperworks.v1 import jobs_pb2

# a call to a step's service, ValidateJob included: it runs the service's own Submit<Kind>
# checks, which load the service's method code with its first call
CALL_TIMEOUT_S = 30.0


def internal_ready(settings: Settings) -> None:
    """Refuses pipelines where they could not act for the tenant: auth on, no internal credential."""
    if settings.auth_tokens.strip() and not settings.internal_token:
        raise FailedPrecondition("pipelines need the operator's internal credential "
                                 "(PAPERWORKS_INTERNAL_TOKEN) to submit steps for a tenant")


class TenantClient(Client):
    """The SDK client speaking for `tenant` (and, for steps, for pipeline job `parent`)."""

    def __init__(self, tenant: str, parent: str | None = None, settings: Settings | None = None):
        settings = settings or get_settings()
        super().__init__(settings=settings, token=settings.internal_token)
        self.tenant = tenant
        self.parent = parent

    @property
    def metadata(self) -> tuple:
        if not self.token:  # dev mode without an internal credential: every caller is one tenant
            return ()
        found = [("authorization", f"Bearer {self.token}"), (TENANT_HEADER, self.tenant)]
        if self.parent:
            found.append((PARENT_HEADER, self.parent))
        return tuple(found)

    def validate_job(self, service: str, kind: str, params: dict,
                     deferred: list[str]) -> jobs_pb2.ValidateJobResponse:
        struct = struct_pb2.Struct()
        struct.update(params)
        return self.jobs(service).ValidateJob(
            jobs_pb2.ValidateJobRequest(kind=kind, params=struct, deferred_inputs=sorted(deferred)),
            metadata=self.metadata, timeout=CALL_TIMEOUT_S)


def unreachable(exc: grpc.RpcError) -> bool:
    return exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
