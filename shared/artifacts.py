"""Content-addressed artifact storage: a blob's name is the sha256 of its bytes.

Writing the same bytes twice stores them once, a takeover that re-produces an
artifact cannot corrupt it, and readers can verify what they pulled.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


class ArtifactStore:
    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.root / sha256[:2] / sha256[2:]

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        target = self.path(sha)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        return sha

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).exists()

    def size(self, sha256: str) -> int:
        return self.path(sha256).stat().st_size

    def read_chunks(self, sha256: str, chunk_bytes: int) -> Iterator[bytes]:
        with open(self.path(sha256), "rb") as f:
            while chunk := f.read(chunk_bytes):
                yield chunk
