"""Inputs a job reads: server paths under a data root, uploads, other jobs' artifacts, S3 objects.

A request names a file or folder one of four ways (`InputRef`): an upload of the tenant's
(UploadArtifact), an artifact of one of the tenant's SUCCEEDED jobs, an `s3://` object in a bucket
the operator lists, or a path on the server. Server paths must lie under the data root
(`PAPERWORKS_DATA_ROOT`, or `PAPERWORKS_<SERVICE>_DATA_ROOT` for one service; symlinks followed);
with auth tokens configured and no root, server paths are refused, and in dev mode (no tokens)
the root is the working directory of the process. A refused path reads the same whether it exists
or not. Archives (.tar, .tar.gz, .zip) unpack only after every member is checked.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paperworks.shared.errors import InvalidArgument
from pydantic import BaseModel, ConfigDict, Field, model_validator


def data_root_variable(service: str) -> str:
    return f"PAPERWORKS_{service.upper()}_DATA_ROOT"


def data_root(service: str) -> Path | None:
    """The folder server paths must lie in: the service's own root, else the common one; in dev
    mode (no auth tokens) the working directory; None where server paths are refused."""
    value = os.environ.get(data_root_variable(service), "") or os.environ.get("PAPERWORKS_DATA_ROOT", "")
    if value:
        return Path(value).expanduser().resolve()
    if os.environ.get("PAPERWORKS_AUTH_TOKENS", "").strip():
        return None
    return Path.cwd().resolve()


def server_path(path: str, service: str, field: str) -> Path:
    """`path` resolved (symlinks followed), refused unless it lies under the data root. The
    refusal is the same whether the path exists or not, so nothing about the file system leaks.
    A path the OS cannot take (a NUL byte, a name too long, an unknown ~user) is refused too."""
    root = data_root(service)
    if root is None:
        raise InvalidArgument(field, "server paths are not accepted here (no data root is configured): "
                              "upload the file, or name an artifact or an s3:// object")
    try:
        resolved = Path(path).expanduser().resolve()
        resolved.exists()  # raises for names the file system refuses (ENAMETOOLONG)
    except (ValueError, OSError, RuntimeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise InvalidArgument(field, f"{path[:200]!r} is not a usable path: {why}") from None
    if not resolved.is_relative_to(root):
        raise InvalidArgument(field, f"must lie under the data root ({data_root_variable(service)} or "
                              "PAPERWORKS_DATA_ROOT)")
    return resolved


ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def unpack_archive(archive: Path, dest: Path, field: str, max_bytes: int = 8 * 1024**3,
                   max_files: int = 100_000) -> Path:
    """Unpacks a .tar/.tar.gz/.zip into `dest`, checking every member first: no absolute paths, no
    `..`, no links or devices, at most `max_files` members and `max_bytes` unpacked. A refused
    archive writes nothing; the refusal (INVALID_ARGUMENT on `field`) names the member."""
    import tarfile
    import zipfile

    members: list[tuple[str, int]] = []
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                mode = (info.external_attr >> 16) & 0o170000
                if mode and mode not in (0o100000, 0o040000):
                    raise InvalidArgument(field, f"archive member {info.filename!r} is a link or device")
                members.append((info.filename, info.file_size, info.filename.endswith("/")))
            _check_members(members, field, max_bytes, max_files)
            _extract(lambda: zf.extractall(dest), dest, field)
        return dest
    if not tarfile.is_tarfile(archive):
        raise InvalidArgument(field, "not a .tar, .tar.gz or .zip archive")
    with tarfile.open(archive) as tar:
        infos = tar.getmembers()
        for info in infos:
            if not (info.isfile() or info.isdir()):
                raise InvalidArgument(field, f"archive member {info.name!r} is a link or device")
            members.append((info.name, info.size, info.isdir()))
        _check_members(members, field, max_bytes, max_files)
        _extract(lambda: tar.extractall(dest, members=infos, filter="data"), dest, field)
    return dest


def _extract(extract, dest: Path, field: str) -> None:
    """Runs `extract` into a new `dest`; an archive the file system cannot take (a file where a
    folder is, a name too long) is refused and leaves nothing behind."""
    import tarfile

    dest.mkdir(parents=True, exist_ok=True)
    try:
        extract()
    except (OSError, tarfile.TarError, ValueError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise InvalidArgument(field, f"the archive cannot be unpacked: {type(exc).__name__}") from None


def _check_members(members: list[tuple[str, int]], field: str, max_bytes: int, max_files: int) -> None:
    if len(members) > max_files:
        raise InvalidArgument(field, f"archive has {len(members)} members, more than {max_files}")
    total = 0
    for name, size, is_dir in members:
        parts = Path(name).parts
        if name.startswith(("/", "\\")) or Path(name).is_absolute() or ".." in parts or ":" in name:
            raise InvalidArgument(field, f"archive member {name!r} points outside the archive")
        if not is_dir and not [p for p in parts if p != "."]:
            raise InvalidArgument(field, f"archive member {name!r} is a file without a name")
        total += size
        if total > max_bytes:
            raise InvalidArgument(field, f"archive unpacks to more than {max_bytes} bytes")


class JobArtifactParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: str = Field(min_length=1, max_length=96)
    name: str = Field(min_length=1, max_length=256)


class InputRefParams(BaseModel):
    """`paperworks.v1.InputRef` as job parameters: exactly one source."""

    model_config = ConfigDict(extra="forbid")
    upload: str = Field(default="", pattern=r"^([0-9a-f]{64})?$")
    artifact: JobArtifactParams | None = None
    uri: str = Field(default="", max_length=2048, pattern=r"^(s3://[^/]+/.+)?$")
    path: str = Field(default="", max_length=4096)

    @model_validator(mode="after")
    def _one_source(self):
        chosen = [n for n in ("upload", "artifact", "uri", "path") if getattr(self, n)]
        if len(chosen) != 1:
            raise ValueError("set exactly one of upload, artifact, uri and path")
        return self


@dataclass(frozen=True)
class InputScope:
    """Whose inputs a sync call reads and where they are stored (`ServiceRuntime.inputs`); a job's
    `JobContext` has the same three attributes."""

    store: Any  # paperworks.shared.db.jobs.JobStore
    artifacts: Any  # paperworks.shared.artifacts.ArtifactStore
    tenant: str


def require_folder_archive(source: InputRefParams, scope: InputScope, field: str) -> None:
    """At submission, a model folder named by an upload, an artifact or an S3 object must travel as
    an archive (its content is checked by the worker when it unpacks it); a server path is not
    looked at here. INVALID_ARGUMENT on `field` otherwise."""
    if source.path:
        return
    if source.upload:
        from paperworks.shared.db.uploads import UploadStore

        name = UploadStore(scope.store.db).get(scope.tenant, source.upload, field).name
    else:
        name = source.artifact.name if source.artifact else source.uri.rpartition("/")[2]
    if not is_archive(name):
        raise InvalidArgument(
            field, f"{name!r} is not a folder: send a model folder as a .tar, .tar.gz or .zip"
        )


def path_shorthand(data, path: str = "path", source: str = "source"):
    """For a `model_validator(mode="before")`: a message with a string `path` and an InputRef
    `source` takes either; `path` is short for `source.path` (both set and different: refused)."""
    if not isinstance(data, dict) or not data.get(path):
        return data
    given = data.get(source)
    if not given:
        return {**data, source: {"path": data[path]}}
    if (given.get("path") if isinstance(given, dict) else getattr(given, "path", "")) != data[path]:
        raise ValueError(f"{source}: set one of {path} and {source}")
    return data


def input_refs(params: BaseModel, prefix: str = ""):
    """Every `InputRefParams` in a job's validated parameters, with the field path users type
    (`dataset.source`, `model.source`, `images.2`, as pydantic's violations name them)."""
    if isinstance(params, list):
        items = [(str(i), v) for i, v in enumerate(params)]
    else:
        items = [(name, getattr(params, name)) for name in type(params).model_fields]
    for name, value in items:
        where = f"{prefix}.{name}" if prefix else name
        if isinstance(value, InputRefParams):
            yield where, value
        elif isinstance(value, BaseModel | list) and value:
            yield from input_refs(value, where)


def check_inputs(params: BaseModel, scope: InputScope, service: str) -> None:
    """Submit-time checks of every input a job names, so a bad one is refused before the job is
    queued: server paths under the data root, the tenant's own live uploads (pinned now: the job
    uses them), finished jobs' artifacts, s3:// buckets inputs may come from."""
    from paperworks.shared.config import get_settings

    for field, ref in input_refs(params):
        if ref.path:
            server_path(ref.path, service, f"{field}.path")
        elif ref.upload:
            from paperworks.shared.db.uploads import UploadStore

            uploads = UploadStore(scope.store.db)
            uploads.get(scope.tenant, ref.upload, f"{field}.upload")
            uploads.pin(scope.tenant, ref.upload)
        elif ref.artifact is not None:
            from paperworks.shared.job_refs import artifact_sha, finished_job

            where = f"{field}.artifact"
            job = finished_job(scope.store, scope.tenant, service, ref.artifact.job_id, f"{where}.job_id")
            artifact_sha(scope.store, job.id, ref.artifact.name, f"{where}.name")
        else:
            bucket = ref.uri.removeprefix("s3://").partition("/")[0]
            if bucket not in _input_buckets(get_settings()):
                raise InvalidArgument(f"{field}.uri", "not a bucket inputs may come from "
                                      "(PAPERWORKS_INPUT_S3_BUCKETS)")


def _input_buckets(settings) -> set[str]:
    return {b.strip() for b in settings.input_s3_buckets.split(",") if b.strip()}


def resolve_input(ref: InputRefParams, ctx: InputScope, service: str, field: str, *,
                  unpack: bool = False) -> Path:
    """A local file (or, with `unpack`, a folder for an archive) holding the input `ref` names,
    for the tenant of `ctx` (a JobContext or an InputScope); every refusal names `field` and its
    source."""
    from paperworks.shared.config import get_settings

    cache = Path(get_settings().state_dir) / "inputs"
    if ref.path:
        return server_path(ref.path, service, f"{field}.path")
    if ref.upload:
        from paperworks.shared.db.uploads import UploadStore

        uploads = UploadStore(ctx.store.db)
        upload = uploads.get(ctx.tenant, ref.upload, f"{field}.upload")
        uploads.pin(ctx.tenant, ref.upload)
        return _materialize(ctx.artifacts.path(ref.upload), ref.upload, upload.name, cache, unpack,
                            f"{field}.upload")
    if ref.artifact is not None:
        from paperworks.shared.job_refs import artifact_sha, finished_job

        where = f"{field}.artifact"
        job = finished_job(ctx.store, ctx.tenant, service, ref.artifact.job_id, f"{where}.job_id")
        sha = artifact_sha(ctx.store, job.id, ref.artifact.name, f"{where}.name")
        return _materialize(ctx.artifacts.path(sha), sha, ref.artifact.name, cache, unpack, where)
    return _materialize(*_s3_object(ref.uri, cache, f"{field}.uri", get_settings()), cache, unpack,
                        f"{field}.uri")


def _s3_object(uri: str, cache: Path, field: str, settings) -> tuple[Path, str, str]:
    import hashlib

    from botocore.exceptions import BotoCoreError, ClientError
    from paperworks.shared.artifacts import file_sha256, s3_client

    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if bucket not in _input_buckets(settings):
        raise InvalidArgument(field, "not a bucket inputs may come from (PAPERWORKS_INPUT_S3_BUCKETS)")
    client = s3_client(settings.s3_endpoint_url, settings.s3_region)
    target = cache / "s3" / hashlib.sha256(uri.encode()).hexdigest()
    target.mkdir(parents=True, exist_ok=True)
    local = target / "object"
    try:
        client.download_file(bucket, key, str(local))
    except (ClientError, BotoCoreError):
        raise InvalidArgument(field, f"no readable object {uri}") from None
    return local, file_sha256(local), Path(key).name


def archive_root(folder: Path, is_root) -> Path:
    """`folder`, or its one subfolder where `folder` is not itself the root `is_root(path)` looks for
    and the archive was made with the folder on top (`tar czf d.tar.gz d/`; `paperworks upload`
    packs a folder's contents)."""
    if not folder.is_dir() or is_root(folder):
        return folder
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder


def _materialize(blob: Path, sha: str, name: str, cache: Path, unpack: bool, field: str) -> Path:
    """The blob under its own name (loaders read suffixes such as .nii.gz or .csv), or unpacked."""
    home = cache / sha
    if unpack and is_archive(name):
        folder = home / "unpacked"
        if not folder.exists():
            cache.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=cache, prefix=".unpack-"))
            try:
                unpack_archive(blob, staging / "tree", field)
                home.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(OSError):  # another job unpacked it first
                    os.replace(staging / "tree", folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return folder
    named = home / Path(name).name
    if not named.exists():
        home.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            named.symlink_to(blob)
    return named
