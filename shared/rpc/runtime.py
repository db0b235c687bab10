"""What a service's servicers share: settings, its spec, the job store, artifacts, auth.

`submit` is the whole Submit<Kind> path, so a service's servicer stays one line
per RPC: validate the typed request against the kind's parameter model, write
the job and its outbox row in one transaction, answer with the Job.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import grpc
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.config import Settings
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.errors import violations_from_pydantic
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

    @classmethod
    def create(cls, settings: Settings, spec: ServiceSpec) -> ServiceRuntime:
        db = Database(settings.sqlalchemy_url)
        return cls(
            settings=settings,
            spec=spec,
            db=db,
            store=JobStore(db),
            artifacts=ArtifactStore(settings.artifacts_dir),
            auth=Authenticator(settings.auth_tokens),
        )

    def tenant(self, context: grpc.aio.ServicerContext) -> str:
        return self.auth.tenant_of(context)

    async def submit(self, context, kind_name: str, request) -> jobs_pb2.Job:
        tenant = self.tenant(context)
        kind = self.spec.kind(kind_name)
        try:
            params = kind.params.model_validate(request_params(request))
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        job, _ = await asyncio.to_thread(
            self.store.submit,
            tenant,
            self.spec.name,
            kind_name,
            params.model_dump(mode="json"),
            getattr(request, "idempotency_key", "") or None,
        )
        self.on_submitted()
        return job_message(job)
