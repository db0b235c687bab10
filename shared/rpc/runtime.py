"""What a service's servicers share: settings, its spec, the job store, artifacts, auth.

`submit` is the whole Submit<Kind> path, so a service's servicer stays one line
per RPC: validate the typed request against the kind's parameter model, check
the tenant's quotas, write the job and its outbox row in one transaction, answer
with the Job.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from paperworks.shared.artifacts import ArtifactStore, open_artifact_store
from paperworks.shared.backends import endpoints
from paperworks.shared.config import Settings
from paperworks.shared.db import quotas
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.errors import violations_from_pydantic
from paperworks.shared.inputs import InputScope, check_inputs
from paperworks.shared.registry import ServiceSpec
from paperworks.shared.rpc.auth import Authenticator
from paperworks.shared.rpc.convert import job_message, request_params
from paperworks.v1 import jobs_pb2
from pydantic import ValidationError


@dataclass
class ServiceRuntime:
    settings: Settings
    spec: ServiceSpec
    db: Database
    store: JobStore
    artifacts: ArtifactStore
    auth: Authenticator
    on_submitted: Callable[[], None] = lambda: None  # wakes the outbox relay
    # one tenant's submits run one at a time when quotas are on: count, then insert
    _quota_locks: defaultdict[str, asyncio.Lock] = field(
        default_factory=lambda: defaultdict(asyncio.Lock))

    @classmethod
    def create(cls, settings: Settings, spec: ServiceSpec) -> ServiceRuntime:
        db = Database(settings.sqlalchemy_url)
        return cls(
            settings=settings,
            spec=spec,
            db=db,
            store=JobStore(db),
            artifacts=open_artifact_store(settings),
            auth=Authenticator(settings.auth_tokens),
        )

    def tenant(self, context: grpc.aio.ServicerContext) -> str:
        """The caller's tenant; also the tenant model endpoints are resolved for in this call."""
        tenant = self.auth.tenant_of(context)
        endpoints.TENANT.set(tenant)
        return tenant

    def inputs(self, context: grpc.aio.ServicerContext) -> InputScope:
        """The caller's inputs (uploads, job artifacts) for a sync call (`shared.inputs`)."""
        return InputScope(self.store, self.artifacts, self.tenant(context))

    async def submit(self, context, kind_name: str, request) -> jobs_pb2.Job:
        tenant = self.tenant(context)
        kind = self.spec.kind(kind_name)
        try:
            params = kind.params.model_validate(request_params(request))
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        await asyncio.to_thread(check_inputs, params, InputScope(self.store, self.artifacts, tenant),
                                self.spec.name)
        key = getattr(request, "idempotency_key", "") or None
        max_queued = self.settings.max_queued_jobs_per_tenant
        max_active = self.settings.max_active_jobs_per_tenant
        limited = bool(max_queued or max_active)
        async with self._quota_locks[tenant] if limited else contextlib.nullcontext():
            if limited:
                await asyncio.to_thread(
                    quotas.check_submit, self.db, tenant, self.spec.name, key, max_queued,
                    max_active,
                )
            job, _ = await asyncio.to_thread(
                self.store.submit, tenant, self.spec.name, kind_name,
                params.model_dump(mode="json"), key,
            )
        self.on_submitted()
        return job_message(job)
