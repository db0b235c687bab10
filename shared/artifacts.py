"""Content-addressed artifact storage: a blob's name is the sha256 of its bytes.

Writing the same bytes twice stores them once, a takeover that re-produces an
artifact cannot corrupt it, and readers can verify what they pulled. One interface,
two stores: the local filesystem (the embedded stack) and any S3-compatible object
store (MinIO in Compose, a cloud bucket in production: `PAPERWORKS_S3_BUCKET`), so
machines share artifacts without a shared volume. `path(sha)` is a local file with the
blob's bytes in both (for S3, a verified copy in a local cache).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def check_sha(sha256: str) -> str:
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return sha256


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _atomic_copy(source: Path, target: Path, durable: bool = True) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
        shutil.copyfileobj(src, out, 1 << 20)
        out.flush()
        if durable:
            os.fsync(out.fileno())
    os.replace(tmp, target)


class ArtifactStore:
    """The local filesystem store: blobs under `root/ab/cdef...`, each written to a temporary
    file and renamed into place (a reader never sees half a blob). `durable` syncs the bytes
    before the rename, for stores whose database syncs its commits (a process crash loses
    nothing either way; only a power cut tells them apart)."""

    def __init__(self, root: Path, durable: bool = True):
        self.root = Path(root)
        self.durable = durable

    def path(self, sha256: str) -> Path:
        return self.root / check_sha(sha256)[:2] / sha256[2:]

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        target = self.path(sha)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if self.durable:
                    os.fsync(f.fileno())
            os.replace(tmp, target)
        return sha

    def put_file(self, source: Path, sha256: str | None = None) -> str:
        """Stores a file's bytes without reading them into memory (uploads)."""
        sha = sha256 or file_sha256(source)
        if not self.exists(sha):
            _atomic_copy(source, self.path(sha), self.durable)
        return sha

    def get(self, sha256: str) -> bytes:
        return self.path(sha256).read_bytes()

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).exists()

    def size(self, sha256: str) -> int:
        return self.path(sha256).stat().st_size

    def delete(self, sha256: str) -> None:
        """Removes a blob nothing names any more (expired uploads)."""
        self.path(sha256).unlink(missing_ok=True)

    def read_chunks(self, sha256: str, chunk_bytes: int) -> Iterator[bytes]:
        with open(self.path(sha256), "rb") as f:
            while chunk := f.read(chunk_bytes):
                yield chunk


class S3ArtifactStore:
    """Blobs as objects `prefix + ab/cdef...` in an S3 bucket (boto3; any S3-compatible endpoint).
    `path(sha)` downloads once into `cache_dir` and checks the bytes' hash before using them."""

    def __init__(self, bucket: str, *, cache_dir: Path, prefix: str = "", client=None,
                 endpoint_url: str | None = None, region: str | None = None):
        self.client = client if client is not None else s3_client(endpoint_url, region)
        self.bucket = bucket
        self.prefix = prefix
        self.cache = ArtifactStore(cache_dir)

    def key(self, sha256: str) -> str:
        return f"{self.prefix}{check_sha(sha256)[:2]}/{sha256[2:]}"

    def _head(self, sha256: str) -> dict | None:
        from botocore.exceptions import ClientError

        try:
            return self.client.head_object(Bucket=self.bucket, Key=self.key(sha256))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        if self._head(sha) is None:
            self.client.put_object(Bucket=self.bucket, Key=self.key(sha), Body=data)
        return sha

    def put_file(self, source: Path, sha256: str | None = None) -> str:
        sha = sha256 or file_sha256(source)
        if self._head(sha) is None:
            self.client.upload_file(str(source), self.bucket, self.key(sha))
        return sha

    def get(self, sha256: str) -> bytes:
        return self.path(sha256).read_bytes()

    def exists(self, sha256: str) -> bool:
        return self._head(sha256) is not None

    def size(self, sha256: str) -> int:
        head = self._head(sha256)
        if head is None:
            raise FileNotFoundError(f"no artifact {sha256} in s3://{self.bucket}/{self.prefix}")
        return int(head["ContentLength"])

    def delete(self, sha256: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.key(sha256))
        self.cache.delete(sha256)

    def read_chunks(self, sha256: str, chunk_bytes: int) -> Iterator[bytes]:
        body = self.client.get_object(Bucket=self.bucket, Key=self.key(sha256))["Body"]
        try:
            yield from body.iter_chunks(chunk_bytes)
        finally:
            body.close()

    def path(self, sha256: str) -> Path:
        local = self.cache.path(sha256)
        if not local.exists():
            local.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=".dl-")
            os.close(fd)
            try:
                self.client.download_file(self.bucket, self.key(sha256), tmp)
                if file_sha256(Path(tmp)) != sha256:
                    raise OSError(f"s3://{self.bucket}/{self.key(sha256)} does not hash to its name")
                os.replace(tmp, local)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        return local


def s3_client(endpoint_url: str | None = None, region: str | None = None):
    """A boto3 S3 client for the configured endpoint (credentials from the standard AWS_* variables)."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint_url or None, region_name=region or None)


def open_artifact_store(settings) -> ArtifactStore | S3ArtifactStore:
    """The store the settings name: S3 when PAPERWORKS_S3_BUCKET is set, else the filesystem."""
    if settings.s3_bucket:
        return S3ArtifactStore(settings.s3_bucket, cache_dir=settings.state_dir / "artifact-cache",
                               prefix=settings.s3_prefix, endpoint_url=settings.s3_endpoint_url,
                               region=settings.s3_region)
    return ArtifactStore(settings.artifacts_dir, durable=settings.artifacts_durable)
