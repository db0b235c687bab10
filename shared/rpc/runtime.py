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
from contextvars import ContextVar
from dataclasses import dataclass, field

import grpc
from paperworks.shared.artifacts import ArtifactStore, open_artifact_store
from paperworks.shared.backends import endpoints
from paperworks.shared.bus.watch import EventPublisher
from paperworks.shared.config import Settings
from paperworks.shared.db import quotas
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.errors import violations_from_pydantic
from paperworks.shared.inputs import InputRefParams, InputScope, check_inputs, input_refs
from paperworks.shared.registry import ServiceSpec
from paperworks.shared.rpc.auth import Authenticator
from paperworks.shared.rpc.convert import job_message, request_params
from paperworks.v1 import jobs_pb2
from pydantic import BaseModel, ValidationError


@dataclass
class Validation:
    """What `ValidateJob` hears back from a Submit<Kind> it runs without writing (see VALIDATING)."""

    params: BaseModel | None = None


# Set by ValidateJob around a call of the service's own Submit<Kind>: every check that method
# makes runs as for a real submit, then `ServiceRuntime.submit` keeps the validated parameters
# here and writes nothing.
VALIDATING: ContextVar[Validation | None] = ContextVar("paperworks_validating", default=None)


@dataclass
class ServiceRuntime:
    settings: Settings
    spec: ServiceSpec
    db: Database
    store: JobStore
    artifacts: ArtifactStore
    auth: Authenticator
    # hands a new job over (the fast path), in a thread of the loop's executor after the commit
    on_submitted: Callable[[str], None] = lambda job_id: None
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
            store=JobStore(db, on_events=EventPublisher(settings)),
            artifacts=open_artifact_store(settings),
            auth=Authenticator(settings.auth_tokens, settings.internal_token),
        )

    def tenant(self, context: grpc.aio.ServicerContext) -> str:
        """The caller's tenant; also the tenant model endpoints are resolved for in this call."""
        tenant = self.auth.tenant_of(context)
        endpoints.TENANT.set(tenant)
        return tenant

    def inputs(self, context: grpc.aio.ServicerContext) -> InputScope:
        """The caller's inputs (uploads, job artifacts) for a sync call (`shared.inputs`)."""
        return InputScope(self.store, self.artifacts, self.tenant(context))

    async def validate(self, tenant: str, kind_name: str, raw: dict,
                       deferred: frozenset[str] = frozenset()) -> BaseModel:
        """The kind's validated parameters, every input they name checked for `tenant`; what a
        Submit<Kind> and ValidateJob both do before (or instead of) writing anything. Inputs at
        the `deferred` field paths are not checked: a pipeline fills them when an earlier step
        has produced them."""
        kind = self.spec.kind(kind_name)
        try:
            params = kind.params.model_validate(raw)
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        checked = without_inputs(params, deferred)
        if next(input_refs(checked), None) is not None:  # most kinds name none: no thread hop
            await asyncio.to_thread(check_inputs, checked,
                                    InputScope(self.store, self.artifacts, tenant), self.spec.name)
        return params

    async def submit(self, context, kind_name: str, request) -> jobs_pb2.Job:
        tenant = self.tenant(context)
        params = await self.validate(tenant, kind_name, request_params(request))
        validation = VALIDATING.get()
        if validation is not None:  # ValidateJob: everything checked, nothing to write
            validation.params = params
            return jobs_pb2.Job()
        parent = self.auth.parent_of(context)  # only an internal call links a job to its pipeline
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
            job, created = await asyncio.to_thread(
                self.store.submit, tenant, self.spec.name, kind_name,
                params.model_dump(mode="json"), key, parent)
        if created:  # handed off beside the reply, not before it: the caller's next call (its
            # watch, its next submit) overlaps the hand-off; a crash in between loses nothing
            # (the intake record committed with the job, and the dispatcher hands it over)
            asyncio.get_running_loop().run_in_executor(None, self.on_submitted, job.id)
        return job_message(job)


def without_inputs(params: BaseModel, paths: frozenset[str]) -> BaseModel:
    """`params` with the inputs at `paths` (as `paperworks.shared.inputs.input_refs` names them:
    `dataset.source`, `images.2`) left out, for checking the rest; a copy, never validated again."""
    if not paths:
        return params

    def strip(value, where: str):
        if isinstance(value, InputRefParams):
            return None if where in paths else value
        if isinstance(value, list):
            return [strip(v, f"{where}.{i}") for i, v in enumerate(value)]
        if isinstance(value, BaseModel):
            return value.model_copy(update={
                name: strip(getattr(value, name), f"{where}.{name}" if where else name)
                for name in type(value).model_fields})
        return value

    return strip(params, "")
