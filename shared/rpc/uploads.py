"""UploadArtifact: bytes from a remote client into the artifact store, owned by its tenant.

The stream is spooled to a temporary file (never held in memory), hashed on the way, checked
against the size limit as it arrives and against the tenant's quota before anything is stored;
a refused upload leaves no blob and no row behind.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from pathlib import Path

from google.protobuf import timestamp_pb2
from paperworks.shared.db.uploads import UploadStore, check_quota
from paperworks.shared.errors import InvalidArgument, ResourceExhausted
from paperworks.v1 import common_pb2, jobs_pb2

MAX_NAME = 256


def check_header(header: jobs_pb2.UploadHeader) -> None:
    name = header.name
    if not name or len(name) > MAX_NAME or "/" in name or "\\" in name or name in (".", "..") \
            or "\0" in name:
        raise InvalidArgument("header.name", f"a file name of 1..{MAX_NAME} characters without folders, "
                              f"got {name[:80]!r}")
    if len(header.media_type) > 128:
        raise InvalidArgument("header.media_type", "at most 128 characters")
    hexdigest = header.sha256
    if hexdigest and (len(hexdigest) != 64 or any(c not in "0123456789abcdef" for c in hexdigest)):
        raise InvalidArgument("header.sha256", "a lowercase sha256 hex digest, or empty")


async def receive(requests, *, tenant: str, rt) -> jobs_pb2.UploadArtifactResponse:
    settings, uploads = rt.settings, UploadStore(rt.db)
    first = await anext(aiter(requests), None)
    if first is None or first.WhichOneof("part") != "header":
        raise InvalidArgument("header", "the first message of an upload must be its header")
    header = first.header
    check_header(header)
    spool_dir = Path(settings.state_dir) / "uploads-tmp"
    spool_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=spool_dir, prefix="upload-")
    try:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            async for message in requests:
                if message.WhichOneof("part") != "data":
                    raise InvalidArgument("header", "only the first message of an upload is a header")
                size += len(message.data)
                if size > settings.max_upload_bytes:
                    raise ResourceExhausted(f"upload exceeds PAPERWORKS_MAX_UPLOAD_BYTES "
                                            f"({settings.max_upload_bytes} bytes)", "data")
                digest.update(message.data)
                out.write(message.data)
        if size == 0:
            raise InvalidArgument("data", "an upload needs at least one byte")
        sha = digest.hexdigest()
        if header.sha256 and header.sha256 != sha:
            raise InvalidArgument("header.sha256", f"the bytes hash to {sha}, not {header.sha256}: "
                                  "damaged on the way; upload again")
        quota = settings.upload_quota_bytes
        # checked before the blob is stored (and again, atomically, when the upload is recorded)
        check_quota(tenant, await asyncio.to_thread(uploads.held_bytes, tenant), size, quota)
        await asyncio.to_thread(rt.artifacts.put_file, Path(tmp), sha)
        media_type = header.media_type or "application/octet-stream"
        row = await asyncio.to_thread(uploads.record, tenant, sha, header.name, media_type, size,
                                      settings.upload_ttl_s, quota)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    expire = timestamp_pb2.Timestamp()
    expire.FromDatetime(row.expires_at)
    return jobs_pb2.UploadArtifactResponse(
        artifact=common_pb2.ArtifactRef(sha256=sha, name=header.name, media_type=media_type, size_bytes=size),
        expire_time=expire)
