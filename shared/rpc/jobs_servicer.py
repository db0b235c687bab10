"""JobService: the one job surface each service serves for its own jobs.

A tenant sees only its own jobs; anything else is NOT_FOUND, never a hint that
the job exists. WatchJob replays the history from the database, then follows
new events until the terminal state change.

A WatchJob stream re-reads its job's events when the process that committed
them says so on Redis (`paperworks.shared.bus.watch`), or after a slow fallback
interval; while Redis is unreachable it polls, fast while the job is active.
"""
from __future__ import annotations

import asyncio
import contextlib

from google.protobuf import json_format
from paperworks.shared.bus.watch import WatchHub
from paperworks.shared.db.models import TERMINAL_STATES
from paperworks.shared.errors import InvalidArgument, NotFound, PaperworksError
from paperworks.shared.rpc import uploads
from paperworks.shared.rpc.convert import (
    PROTO_TO_STATE,
    artifact_ref,
    event_message,
    job_message,
    request_params,
    struct,
)
from paperworks.shared.rpc.describe import describe
from paperworks.shared.rpc.runtime import VALIDATING, ServiceRuntime, Validation
from paperworks.shared.rpc.status import rpc_method
from paperworks.shared.sdk import discovery
from paperworks.v1 import jobs_pb2, jobs_pb2_grpc

# Events come in bursts (a short job's whole life takes milliseconds) or seconds apart
# (a long training step): poll fast while the job was recently active, slowly once quiet.
WATCH_POLL_FAST_S = 0.005
WATCH_POLL_SLOW_S = 0.25
WATCH_QUIET_AFTER_S = 2.0
WATCH_FALLBACK_S = 1.0  # with notices live: a read this often even if none came
MAX_CHUNK = 4 * 1024 * 1024
MAX_DEFERRED = 256
MAX_FIELD_PATH = 512


class JobServicer(jobs_pb2_grpc.JobServiceServicer):
    def __init__(self, rt: ServiceRuntime, service_servicer):
        """`service_servicer`: the service's own servicer, whose Submit<Kind> ValidateJob runs."""
        self.rt = rt
        self.service_servicer = service_servicer
        self._hub: WatchHub | None = None
        self._description: jobs_pb2.DescribeServiceResponse | None = None

    def _watch_hub(self) -> WatchHub:
        """Created on first use, in the server's event loop that its notices wake."""
        if self._hub is None:
            self._hub = WatchHub(self.rt.settings, self.rt.spec.name)
        return self._hub

    async def _job(self, context, job_id: str):
        if not job_id:
            raise InvalidArgument("job_id", "is required")
        return await asyncio.to_thread(
            self.rt.store.get, self.rt.tenant(context), self.rt.spec.name, job_id
        )

    async def _full(self, job):
        artifacts = await asyncio.to_thread(self.rt.store.artifacts, job.id)
        return job_message(job, artifacts)

    @rpc_method
    async def DescribeService(self, request, context):
        if self._description is None:
            self._description = await asyncio.to_thread(describe, self.rt.spec)  # imports the
            # servicer module for its docstrings: off the event loop
        return self._description

    @rpc_method
    async def UploadArtifact(self, request_iterator, context):
        return await uploads.receive(request_iterator, tenant=self.rt.tenant(context), rt=self.rt)

    @rpc_method
    async def ValidateJob(self, request, context):
        tenant = self.rt.tenant(context)
        self.rt.spec.kind(request.kind)  # INVALID_ARGUMENT naming `kind` for one it does not have
        if len(request.deferred_inputs) > MAX_DEFERRED or any(
                len(p) > MAX_FIELD_PATH for p in request.deferred_inputs):
            raise InvalidArgument("deferred_inputs", f"at most {MAX_DEFERRED} paths of at most "
                                  f"{MAX_FIELD_PATH} characters")
        # the typed Submit request first, as a client would build it: its proto fields, defaults
        # and enum names
        typed = discovery.submit_request(self.rt.spec.name, request.kind,
                                         json_format.MessageToDict(request.params))
        deferred = frozenset(request.deferred_inputs)
        if deferred:
            # a pipeline step: what earlier steps will produce cannot be looked at yet, so the
            # parameters and the other inputs are checked, and the service's own checks of the
            # jobs and models a request names wait for the step's submit
            params = await self.rt.validate(tenant, request.kind, request_params(typed), deferred)
        else:
            params = await self._as_submit(request.kind, typed, context)
        return jobs_pb2.ValidateJobResponse(params=struct(params.model_dump(mode="json")))

    async def _as_submit(self, kind: str, typed, context):
        """Runs the service's own Submit<Kind> with `typed`, writing nothing (`VALIDATING`): every
        check a submit makes, in the same order and with the same refusal (the method aborts
        this call as it would abort a submit); the validated parameters."""
        method = discovery.submit_method(self.rt.spec.name, kind).name
        validation = Validation()
        token = VALIDATING.set(validation)
        try:
            await getattr(self.service_servicer, method)(typed, context)
        finally:
            VALIDATING.reset(token)
        if validation.params is None:  # a Submit<Kind> that does not go through rt.submit
            raise PaperworksError(f"{method} validated nothing")
        return validation.params

    @rpc_method
    async def GetJob(self, request, context):
        return jobs_pb2.GetJobResponse(job=await self._full(await self._job(context, request.job_id)))

    @rpc_method
    async def ListJobs(self, request, context):
        states = []
        for i, s in enumerate(request.states):
            if s not in PROTO_TO_STATE:
                raise InvalidArgument(f"states[{i}]", f"unknown job state {s}")
            states.append(PROTO_TO_STATE[s])
        jobs, token = await asyncio.to_thread(
            self.rt.store.list,
            self.rt.tenant(context),
            self.rt.spec.name,
            request.kind,
            tuple(states),
            request.page_size,
            request.page_token,
        )
        return jobs_pb2.ListJobsResponse(
            jobs=[job_message(j) for j in jobs], next_page_token=token
        )

    @rpc_method
    async def WatchJob(self, request, context):
        job = await self._job(context, request.job_id)
        if request.after_seq < 0:
            raise InvalidArgument("after_seq", "must be >= 0")
        seq = request.after_seq
        hub = self._watch_hub()
        sqlite = self.rt.db.engine.dialect.name == "sqlite"
        async with hub.watching(job.id) as noticed:
            loop = asyncio.get_running_loop()
            last_event = loop.time()
            while True:
                noticed.clear()  # a notice from now on is for events this read may miss
                if sqlite:  # in WAL mode a read never waits for a writer: no thread hop
                    events = self.rt.store.events_after(job.id, seq)
                else:
                    events = await asyncio.to_thread(self.rt.store.events_after, job.id, seq)
                for ev in events:
                    seq = ev.seq
                    yield jobs_pb2.WatchJobResponse(event=event_message(ev))
                    if ev.type == "STATE_CHANGED" and ev.state in TERMINAL_STATES:
                        return
                if events:
                    last_event = loop.time()
                if hub.live.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(WATCH_FALLBACK_S):
                            await noticed.wait()
                else:
                    quiet = loop.time() - last_event > WATCH_QUIET_AFTER_S
                    await asyncio.sleep(WATCH_POLL_SLOW_S if quiet else WATCH_POLL_FAST_S)

    @rpc_method
    async def CancelJob(self, request, context):
        await self._job(context, request.job_id)
        job = await asyncio.to_thread(
            self.rt.store.request_cancel, self.rt.tenant(context), self.rt.spec.name,
            request.job_id,
        )
        return jobs_pb2.CancelJobResponse(job=await self._full(job))

    @rpc_method
    async def GetArtifact(self, request, context):
        job = await self._job(context, request.job_id)
        if request.chunk_bytes < 0 or request.chunk_bytes > MAX_CHUNK:
            raise InvalidArgument("chunk_bytes", f"must be between 0 and {MAX_CHUNK}")
        chunk = request.chunk_bytes or 1024 * 1024
        refs = await asyncio.to_thread(self.rt.store.artifacts, job.id)
        ref = next((a for a in refs if a.sha256 == request.sha256), None)
        if ref is None:
            raise NotFound(f"job {job.id} has no artifact {request.sha256!r}", "sha256")
        offset = 0
        for data in self.rt.artifacts.read_chunks(ref.sha256, chunk):
            response = jobs_pb2.GetArtifactResponse(offset=offset, data=data)
            if offset == 0:
                response.artifact.CopyFrom(artifact_ref(ref))
            offset += len(data)
            yield response
