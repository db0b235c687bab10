"""The Python SDK: the CLI's verbs as methods, sync (`Client`) and async (`AsyncClient`).

Job ids start with their service's name (`ops-…`), so every verb but `submit`
finds the right service from the id alone. Endpoints and the token come from
PAPERWORKS_ENDPOINTS / PAPERWORKS_TOKEN, or from the embedded stack's file;
channels use TLS when PAPERWORKS_TLS_CA_FILE is set (`paperworks.shared.sdk.config`).
Light: the generated stubs, grpcio and protobuf only, so a product team can add it to its app.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import tarfile
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
from paperworks.shared.errors import InvalidArgument, NotFound
from paperworks.shared.sdk import channels, discovery
from paperworks.shared.sdk.config import ClientConfig, resolve_endpoints
from paperworks.shared.sdk.states import state_numbers
from paperworks.v1 import jobs_pb2, jobs_pb2_grpc


def service_of(job_id: str) -> str:
    name, sep, _ = job_id.partition("-")
    if not sep or not name:
        raise InvalidArgument("job_id", f"{job_id!r} is not a paperworks job id (service-hex)")
    return name


class _Base:
    def __init__(self, endpoints: dict[str, str] | None = None, token: str | None = None,
                 settings=None):
        """`settings`: a ClientConfig (default: from the environment) or the server's Settings."""
        settings = settings or ClientConfig.from_env()
        found, found_token = resolve_endpoints(settings)
        self.endpoints = endpoints if endpoints is not None else found
        self.token = token if token is not None else found_token
        self.max_message_bytes = settings.max_message_bytes
        self.credentials = channels.channel_credentials(settings)  # None: plaintext
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
        return discovery.stub(service_name, channel)

    def _submit_rpc(self, service_name: str, kind: str, params: dict):
        request = discovery.submit_request(service_name, kind, params)
        rpc = getattr(self.stub(service_name), discovery.submit_method(service_name, kind).name)
        return rpc, request


class Client(_Base):
    """Blocking client."""

    def channel(self, service_name: str) -> grpc.Channel:
        if service_name not in self._channels:
            self._channels[service_name] = channels.channel(
                self._address(service_name), self.credentials, self._options()
            )
        return self._channels[service_name]

    def jobs(self, service_name: str) -> jobs_pb2_grpc.JobServiceStub:
        return jobs_pb2_grpc.JobServiceStub(self.channel(service_name))

    def stub(self, service_name: str):
        """The service's own stub, for its sync RPCs."""
        return self._service_stub(service_name, self.channel(service_name))

    def submit(self, service_name: str, kind: str, timeout: float = 30, **params) -> jobs_pb2.Job:
        rpc, request = self._submit_rpc(service_name, kind, params)
        return rpc(request, metadata=self.metadata, timeout=timeout).job

    def submit_params(self, service_name: str, kind: str, params: dict, idempotency_key: str = "",
                      timeout: float = 30) -> jobs_pb2.Job:
        """`submit` with the parameters as one mapping (a pipeline step's, whatever their names)."""
        body = {**params, "idempotency_key": idempotency_key} if idempotency_key else dict(params)
        rpc, request = self._submit_rpc(service_name, kind, body)
        return rpc(request, metadata=self.metadata, timeout=timeout).job

    def run_pipeline(self, steps: list[dict], idempotency_key: str = "",
                     timeout: float = 60) -> jobs_pb2.Job:
        """Submits a pipeline (`paperworks.pipeline`): `steps` as in a pipeline file."""
        return self.submit_params("pipeline", "run", {"steps": steps}, idempotency_key, timeout)

    def validate_pipeline(self, steps: list[dict], timeout: float = 60) -> list[str]:
        """Validates a pipeline as its submission would, creating nothing: the steps' run order."""
        return list(self.call("pipeline", "ValidateRun", timeout=timeout, steps=steps).order)

    def describe(self, service_name: str) -> jobs_pb2.DescribeServiceResponse:
        """The service's job kinds (with their parameters' JSON Schema) and sync RPCs."""
        return self.jobs(service_name).DescribeService(jobs_pb2.DescribeServiceRequest(),
                                                       metadata=self.metadata, timeout=30)

    def call(self, service_name: str, rpc: str, timeout: float = 120, **params):
        """A sync RPC by name with plain parameters, the token attached: the response message
        (a list of them for a server stream)."""
        method = discovery.rpc_method(service_name, rpc)
        request = discovery.build_request(method, params)
        reply = getattr(self.stub(service_name), rpc)(request, metadata=self.metadata, timeout=timeout)
        return list(reply) if method.server_streaming else reply

    def resolve(self, job_id: str) -> str:
        """A full job id from an id or a unique prefix of one (`ops-3f2a`)."""
        try:
            return self.get(job_id).id
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise
        matches, token = [], ""
        while True:
            jobs, token = self.list(service_of(job_id), page_size=500, page_token=token)
            matches += [j.id for j in jobs if j.id.startswith(job_id)]
            if not token or len(matches) > 1:
                break
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise InvalidArgument("job_id", f"{job_id!r} matches several jobs: {', '.join(matches[:5])}")
        raise NotFound(f"no job {job_id!r}", "job_id")

    def upload(self, path: Path, service_name: str | None = None, media_type: str = "",
               progress=None, timeout: float = 3600) -> jobs_pb2.UploadArtifactResponse:
        """Uploads a file (a folder travels as a .tar.gz) for this tenant's jobs; the reply's
        sha256 names it in job inputs. `progress(sent_bytes, total_bytes)` is called per chunk."""
        service_name = service_name or next(iter(sorted(self.endpoints)), "")
        with upload_source(Path(path)) as (source, name):
            stream = _upload_messages(source, name, media_type, progress)
            return self.jobs(service_name).UploadArtifact(stream, metadata=self.metadata, timeout=timeout)

    def get(self, job_id: str, timeout: float = 30) -> jobs_pb2.Job:
        return self.jobs(service_of(job_id)).GetJob(
            jobs_pb2.GetJobRequest(job_id=job_id), metadata=self.metadata, timeout=timeout
        ).job

    def list(self, service_name: str, kind: str = "", states=(), page_size: int = 50,
             page_token: str = "") -> tuple[list[jobs_pb2.Job], str]:
        reply = self.jobs(service_name).ListJobs(
            jobs_pb2.ListJobsRequest(page_size=page_size, page_token=page_token, kind=kind,
                                     states=state_numbers(states)),
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
            self._channels[service_name] = channels.aio_channel(
                self._address(service_name), self.credentials, self._options()
            )
        return self._channels[service_name]

    def jobs(self, service_name: str) -> jobs_pb2_grpc.JobServiceStub:
        return jobs_pb2_grpc.JobServiceStub(self.channel(service_name))

    def stub(self, service_name: str):
        return self._service_stub(service_name, self.channel(service_name))

    async def submit(self, service_name: str, kind: str, timeout: float = 30,
                     **params) -> jobs_pb2.Job:
        rpc, request = self._submit_rpc(service_name, kind, params)
        return (await rpc(request, metadata=self.metadata, timeout=timeout)).job

    async def describe(self, service_name: str) -> jobs_pb2.DescribeServiceResponse:
        return await self.jobs(service_name).DescribeService(jobs_pb2.DescribeServiceRequest(),
                                                             metadata=self.metadata, timeout=30)

    async def call(self, service_name: str, rpc: str, timeout: float = 120, **params):
        method = discovery.rpc_method(service_name, rpc)
        request = discovery.build_request(method, params)
        reply = getattr(self.stub(service_name), rpc)(request, metadata=self.metadata, timeout=timeout)
        return [r async for r in reply] if method.server_streaming else await reply

    async def get(self, job_id: str, timeout: float = 30) -> jobs_pb2.Job:
        reply = await self.jobs(service_of(job_id)).GetJob(
            jobs_pb2.GetJobRequest(job_id=job_id), metadata=self.metadata, timeout=timeout
        )
        return reply.job

    async def list(self, service_name: str, kind: str = "", states=(), page_size: int = 50,
                   page_token: str = "") -> tuple[list[jobs_pb2.Job], str]:
        reply = await self.jobs(service_name).ListJobs(
            jobs_pb2.ListJobsRequest(page_size=page_size, page_token=page_token, kind=kind,
                                     states=state_numbers(states)),
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


UPLOAD_CHUNK = 1024 * 1024


@contextlib.contextmanager
def upload_source(path: Path):
    """(file to send, its name): the file itself, or a folder packed into a temporary .tar.gz."""
    if not path.exists():
        raise NotFound(f"{path} does not exist", "path")
    if path.is_file():
        yield path, path.name
        return
    with tempfile.TemporaryDirectory(prefix="paperworks-upload-") as tmp:
        archive = Path(tmp) / f"{path.name}.tar.gz"
        # the same folder packs to the same bytes (no times, owners or gzip date), so uploading it
        # again names the same content-addressed upload instead of storing a second copy
        with open(archive, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for item in sorted(path.rglob("*")):
                if item.is_file() and not item.is_symlink():
                    tar.add(item, arcname=item.relative_to(path).as_posix(), recursive=False,
                            filter=_reproducible)
        yield archive, archive.name


def _reproducible(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode = 0o644
    return info


def _upload_messages(source: Path, name: str, media_type: str, progress):
    digest = hashlib.sha256()
    with open(source, "rb") as f:
        while chunk := f.read(UPLOAD_CHUNK):
            digest.update(chunk)
    total, sent = source.stat().st_size, 0
    media = media_type or ("application/gzip" if name.endswith((".gz", ".tgz")) else "")
    yield jobs_pb2.UploadArtifactRequest(header=jobs_pb2.UploadHeader(name=name, media_type=media,
                                                                      sha256=digest.hexdigest()))
    with open(source, "rb") as f:
        while chunk := f.read(UPLOAD_CHUNK):
            sent += len(chunk)
            yield jobs_pb2.UploadArtifactRequest(data=chunk)
            if progress is not None:
                progress(sent, total)


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
