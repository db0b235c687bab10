"""The Python SDK: the CLI's verbs as methods, sync (`Client`) and async (`AsyncClient`).

Job ids start with their service's name (`ops-…`), so every verb but `submit`
finds the right service from the id alone. Endpoints and the token come from
PAPERWORKS_ENDPOINTS / PAPERWORKS_TOKEN, or from the embedded stack's file;
channels use TLS when PAPERWORKS_TLS_CA_FILE is set (see `paperworks.shared.rpc.tls`).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
from google.protobuf import json_format, message_factory
from paperworks.shared.config import Settings, get_settings
from paperworks.shared.db.models import TERMINAL_STATES
from paperworks.shared.errors import InvalidArgument, NotFound
from paperworks.shared.registry import load, service
from paperworks.shared.rpc import tls
from paperworks.shared.rpc.convert import PROTO_TO_STATE, STATE_TO_PROTO
from paperworks.shared.rpc.tls import channel_credentials
from paperworks.v1 import jobs_pb2, jobs_pb2_grpc


def service_of(job_id: str) -> str:
    name, sep, _ = job_id.partition("-")
    if not sep or not name:
        raise InvalidArgument("job_id", f"{job_id!r} is not a paperworks job id (service-hex)")
    return name


def resolve_endpoints(settings: Settings) -> tuple[dict[str, str], str]:
    """(service → host:port, token) from the environment, else the stack file."""
    endpoints: dict[str, str] = {}
    token = settings.token
    if settings.endpoints:
        for entry in settings.endpoints.split(","):
            name, _, addr = entry.strip().partition("=")
            endpoints[name] = addr
    elif settings.stack_file.exists():
        stack = json.loads(settings.stack_file.read_text())
        endpoints = {name: f"{s['host']}:{s['port']}" for name, s in stack["services"].items()}
        token = token or stack.get("token", "")
    return endpoints, token


def submit_request(service_name: str, kind_name: str, params: dict):
    """The typed Submit<Kind> request for plain parameters; unknown fields are named."""
    spec = service(service_name)
    kind = spec.kind(kind_name)
    pb2 = __import__(spec.grpc_module.removesuffix("_grpc"), fromlist=["_"])
    method = pb2.DESCRIPTOR.services_by_name[spec.grpc_service].methods_by_name[kind.submit_rpc]
    request = message_factory.GetMessageClass(method.input_type)()
    try:
        json_format.ParseDict(params, request)
    except json_format.ParseError as exc:
        raise InvalidArgument("params", str(exc)) from None
    return request


def states_filter(states) -> list[int]:
    return [STATE_TO_PROTO[s.upper()] if isinstance(s, str) else s for s in states]


def is_terminal(job: jobs_pb2.Job) -> bool:
    return PROTO_TO_STATE.get(job.state) in TERMINAL_STATES


class _Base:
    def __init__(self, endpoints: dict[str, str] | None = None, token: str | None = None,
                 settings: Settings | None = None):
        settings = settings or get_settings()
        found, found_token = resolve_endpoints(settings)
        self.endpoints = endpoints if endpoints is not None else found
        self.token = token if token is not None else found_token
        self.max_message_bytes = settings.max_message_bytes
        self.credentials = channel_credentials(settings)  # None: plaintext
        self._channels: dict[str, object] = {}

    @property
    def metadata(self) -> tuple:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def _address(self, service_name: str) -> str:
        if service_name not in self.endpoints:
            raise NotFound(
                f"no endpoint for service {service_name!r}: is the stack up "
                "(`paperworks up`) or PAPERWORKS_ENDPOINTS set?", "service",
            )
        return self.endpoints[service_name]

    def _options(self):
        return [("grpc.max_receive_message_length", self.max_message_bytes),
                ("grpc.max_send_message_length", self.max_message_bytes)]

    def _service_stub(self, service_name: str, channel):
        spec = service(service_name)
        return load(f"{spec.grpc_module}:{spec.grpc_service}Stub")(channel)


class Client(_Base):
    """Blocking client."""

    def channel(self, service_name: str) -> grpc.Channel:
        if service_name not in self._channels:
            self._channels[service_name] = tls.channel(
                self._address(service_name), self.credentials, self._options()
            )
        return self._channels[service_name]

    def jobs(self, service_name: str) -> jobs_pb2_grpc.JobServiceStub:
        return jobs_pb2_grpc.JobServiceStub(self.channel(service_name))

    def stub(self, service_name: str):
        """The service's own stub, for its sync RPCs."""
        return self._service_stub(service_name, self.channel(service_name))

    def submit(self, service_name: str, kind: str, timeout: float = 30, **params) -> jobs_pb2.Job:
        request = submit_request(service_name, kind, params)
        rpc = getattr(self.stub(service_name), service(service_name).kind(kind).submit_rpc)
        return rpc(request, metadata=self.metadata, timeout=timeout).job

    def get(self, job_id: str, timeout: float = 30) -> jobs_pb2.Job:
        return self.jobs(service_of(job_id)).GetJob(
            jobs_pb2.GetJobRequest(job_id=job_id), metadata=self.metadata, timeout=timeout
        ).job

    def list(self, service_name: str, kind: str = "", states=(), page_size: int = 50,
             page_token: str = "") -> tuple[list[jobs_pb2.Job], str]:
        reply = self.jobs(service_name).ListJobs(
            jobs_pb2.ListJobsRequest(page_size=page_size, page_token=page_token, kind=kind,
                                     states=states_filter(states)),
            metadata=self.metadata, timeout=30,
        )
        return list(reply.jobs), reply.next_page_token

    def watch(self, job_id: str, after_seq: int = 0,
              timeout: float | None = None) -> Iterator[jobs_pb2.JobEvent]:
        stream = self.jobs(service_of(job_id)).WatchJob(
            jobs_pb2.WatchJobRequest(job_id=job_id, after_seq=after_seq),
            metadata=self.metadata, timeout=timeout,
        )
        for reply in stream:
            yield reply.event

    def wait(self, job_id: str, timeout: float = 600) -> jobs_pb2.Job:
        for _ in self.watch(job_id, timeout=timeout):
            pass
        return self.get(job_id)

    def cancel(self, job_id: str) -> jobs_pb2.Job:
        return self.jobs(service_of(job_id)).CancelJob(
            jobs_pb2.CancelJobRequest(job_id=job_id), metadata=self.metadata, timeout=30
        ).job

    def pull_artifact(self, job_id: str, sha256: str, dest: Path) -> Path:
        """Streams an artifact to `dest` (a folder: named as in the job), checking its hash."""
        stream = self.jobs(service_of(job_id)).GetArtifact(
            jobs_pb2.GetArtifactRequest(job_id=job_id, sha256=sha256),
            metadata=self.metadata, timeout=600,
        )
        return _write_stream(stream, Path(dest), sha256)

    def pull_artifacts(self, job_id: str, dest: Path) -> list[Path]:
        return [self.pull_artifact(job_id, a.sha256, dest) for a in self.get(job_id).artifacts]

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncClient(_Base):
    """asyncio client (grpc.aio) with the same verbs."""

    def channel(self, service_name: str) -> grpc.aio.Channel:
        if service_name not in self._channels:
            self._channels[service_name] = tls.aio_channel(
                self._address(service_name), self.credentials, self._options()
            )
        return self._channels[service_name]

    def jobs(self, service_name: str) -> jobs_pb2_grpc.JobServiceStub:
        return jobs_pb2_grpc.JobServiceStub(self.channel(service_name))

    def stub(self, service_name: str):
        return self._service_stub(service_name, self.channel(service_name))

    async def submit(self, service_name: str, kind: str, timeout: float = 30,
                     **params) -> jobs_pb2.Job:
        request = submit_request(service_name, kind, params)
        rpc = getattr(self.stub(service_name), service(service_name).kind(kind).submit_rpc)
        return (await rpc(request, metadata=self.metadata, timeout=timeout)).job

    async def get(self, job_id: str, timeout: float = 30) -> jobs_pb2.Job:
        reply = await self.jobs(service_of(job_id)).GetJob(
            jobs_pb2.GetJobRequest(job_id=job_id), metadata=self.metadata, timeout=timeout
        )
        return reply.job

    async def list(self, service_name: str, kind: str = "", states=(), page_size: int = 50,
                   page_token: str = "") -> tuple[list[jobs_pb2.Job], str]:
        reply = await self.jobs(service_name).ListJobs(
            jobs_pb2.ListJobsRequest(page_size=page_size, page_token=page_token, kind=kind,
                                     states=states_filter(states)),
            metadata=self.metadata, timeout=30,
        )
        return list(reply.jobs), reply.next_page_token

    async def watch(self, job_id: str, after_seq: int = 0,
                    timeout: float | None = None) -> AsyncIterator[jobs_pb2.JobEvent]:
        stream = self.jobs(service_of(job_id)).WatchJob(
            jobs_pb2.WatchJobRequest(job_id=job_id, after_seq=after_seq),
            metadata=self.metadata, timeout=timeout,
        )
        async for reply in stream:
            yield reply.event

    async def wait(self, job_id: str, timeout: float = 600) -> jobs_pb2.Job:
        async for _ in self.watch(job_id, timeout=timeout):
            pass
        return await self.get(job_id)

    async def cancel(self, job_id: str) -> jobs_pb2.Job:
        reply = await self.jobs(service_of(job_id)).CancelJob(
            jobs_pb2.CancelJobRequest(job_id=job_id), metadata=self.metadata, timeout=30
        )
        return reply.job

    async def pull_artifact(self, job_id: str, sha256: str, dest: Path) -> Path:
        stream = self.jobs(service_of(job_id)).GetArtifact(
            jobs_pb2.GetArtifactRequest(job_id=job_id, sha256=sha256),
            metadata=self.metadata, timeout=600,
        )
        return _write_stream([r async for r in stream], Path(dest), sha256)

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


def _write_stream(replies, dest: Path, sha256: str) -> Path:
    digest = hashlib.sha256()
    dest.mkdir(parents=True, exist_ok=True)
    target = None
    tmp = dest / f".{sha256}.part"
    with open(tmp, "wb") as f:
        for reply in replies:
            if reply.HasField("artifact"):
                target = dest / Path(reply.artifact.name).name
            digest.update(reply.data)
            f.write(reply.data)
    if digest.hexdigest() != sha256:
        tmp.unlink()
        raise OSError(f"artifact {sha256} arrived corrupted (hash {digest.hexdigest()})")
    target = target or dest / sha256
    tmp.replace(target)
    return target
