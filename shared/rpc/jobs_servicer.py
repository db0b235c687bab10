"""JobService: the one job surface each service serves for its own jobs.

A tenant sees only its own jobs; anything else is NOT_FOUND, never a hint that
the job exists. WatchJob replays the history from the database, then follows
new events until the terminal state change.

On SQLite a WatchJob stream re-reads its events only after some process
committed (`CommitFeed`); elsewhere it polls, fast while the job is active.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from paperworks.shared.db.engine import CommitProbe
from paperworks.shared.db.models import TERMINAL_STATES
from paperworks.shared.errors import InvalidArgument, NotFound
from paperworks.shared.rpc import uploads
from paperworks.shared.rpc.convert import (
    PROTO_TO_STATE,
    artifact_ref,
    event_message,
    job_message,
)
from paperworks.shared.rpc.describe import describe
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.v1 import jobs_pb2, jobs_pb2_grpc

# Events come in bursts (a short job's whole life takes milliseconds) or seconds apart
# (a long training step): poll fast while the job was recently active, slowly once quiet.
WATCH_POLL_FAST_S = 0.005
WATCH_POLL_SLOW_S = 0.25
WATCH_QUIET_AFTER_S = 2.0
COMMIT_LOOK_S = 0.002  # how often the feed looks at SQLite's commit counter while anyone watches
MAX_CHUNK = 4 * 1024 * 1024


class CommitFeed:
    """Wakes this server's WatchJob streams when any process committed to the database.

    One task looks at the commit counter (`CommitProbe`, microseconds a look) while
    at least one stream watches and bumps `generation` on a change. A stream notes
    the generation before it queries and afterwards waits for a newer one, so a
    commit between its query and its wait is never missed.
    """

    def __init__(self, probe: CommitProbe):
        self._probe = probe
        self.generation = 0
        self._bumped = asyncio.Event()
        self._watchers = 0
        self._task: asyncio.Task | None = None

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        self._watchers += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._look())
        try:
            yield
        finally:
            self._watchers -= 1

    async def changed_since(self, generation: int, timeout: float) -> None:
        if self.generation != generation:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._bumped.wait()

    async def _look(self) -> None:
        while self._watchers:
            await asyncio.sleep(COMMIT_LOOK_S)
            if self._probe.changed():
                self.generation += 1
                self._bumped.set()
                self._bumped = asyncio.Event()


class JobServicer(jobs_pb2_grpc.JobServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self._feed: CommitFeed | None = None
        self._description: jobs_pb2.DescribeServiceResponse | None = None
        self._can_feed = rt.db.engine.dialect.name == "sqlite"

    def _commit_feed(self) -> CommitFeed | None:
        """Created on first use, in the server's event loop thread that will use its probe."""
        if self._feed is None and self._can_feed:
            self._feed = CommitFeed(self.rt.db.commit_probe())
        return self._feed

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
            self._description = describe(self.rt.spec)
        return self._description

    @rpc_method
    async def UploadArtifact(self, request_iterator, context):
        return await uploads.receive(request_iterator, tenant=self.rt.tenant(context), rt=self.rt)

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
        feed = self._commit_feed()
        async with feed.watching() if feed else contextlib.nullcontext():
            loop = asyncio.get_running_loop()
            last_event = loop.time()
            while True:
                if feed:  # SQLite in WAL mode: a read never waits for a writer, so no thread hop
                    generation = feed.generation
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
                if feed:  # the timeout only bounds the wait should a look ever fail to see a commit
                    await feed.changed_since(generation, WATCH_POLL_SLOW_S)
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
