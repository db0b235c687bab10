"""The artifact store's one interface, the same tests on the filesystem store and on the S3 store
against a real S3-protocol server on loopback (moto's server mode)."""
from __future__ import annotations

import hashlib

import pytest
from paperworks.shared.artifacts import ArtifactStore, S3ArtifactStore, open_artifact_store


@pytest.fixture(params=["filesystem", "s3"])
def blobs(request, tmp_path):
    if request.param == "filesystem":
        return ArtifactStore(tmp_path / "artifacts")
    url, bucket = request.getfixturevalue("s3_endpoint")
    return S3ArtifactStore(bucket, cache_dir=tmp_path / "cache", prefix=f"{tmp_path.name}/", endpoint_url=url)


def test_put_is_content_addressed_and_idempotent(blobs):
    data = b"weights" * 1000
    sha = blobs.put(data)
    assert sha == hashlib.sha256(data).hexdigest() and blobs.put(data) == sha
    assert blobs.exists(sha) and blobs.size(sha) == len(data)
    assert blobs.get(sha) == data and blobs.path(sha).read_bytes() == data
    assert b"".join(blobs.read_chunks(sha, 1000)) == data
    assert [len(c) for c in blobs.read_chunks(sha, 3000)] == [3000, 3000, 1000]


def test_files_are_stored_without_reading_them_whole(blobs, tmp_path):
    source = tmp_path / "big.bin"
    source.write_bytes(bytes(range(256)) * 4096)
    sha = blobs.put_file(source)
    assert sha == hashlib.sha256(source.read_bytes()).hexdigest()
    assert blobs.size(sha) == source.stat().st_size and blobs.get(sha) == source.read_bytes()


def test_missing_and_malformed_names(blobs):
    absent = "0" * 64
    assert not blobs.exists(absent)
    with pytest.raises(ValueError):
        blobs.exists("../../etc/passwd")
    with pytest.raises(ValueError):
        blobs.path("not-hex")


def test_a_corrupted_s3_object_is_refused_not_cached(s3_endpoint, tmp_path):
    url, bucket = s3_endpoint
    store = S3ArtifactStore(bucket, cache_dir=tmp_path / "cache", prefix="corrupt/", endpoint_url=url)
    sha = store.put(b"good bytes")
    store.client.put_object(Bucket=bucket, Key=store.key(sha), Body=b"tampered")
    with pytest.raises(OSError, match="does not hash"):
        store.path(sha)
    assert not store.cache.exists(sha)


def test_the_settings_choose_the_store(s3_endpoint, tmp_path):
    from paperworks.shared.config import Settings

    assert isinstance(open_artifact_store(Settings(state_dir=tmp_path)), ArtifactStore)
    url, bucket = s3_endpoint
    s3 = open_artifact_store(Settings(state_dir=tmp_path, s3_bucket=bucket, s3_endpoint_url=url))
    assert isinstance(s3, S3ArtifactStore) and s3.get(s3.put(b"x")) == b"x"


def test_blobs_are_synced_as_durably_as_the_database_commits(tmp_path, monkeypatch):
    import os

    from paperworks.shared.config import Settings

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    embedded = open_artifact_store(Settings(state_dir=tmp_path))
    postgres = open_artifact_store(Settings(state_dir=tmp_path, database_url="postgresql+psycopg://x/y"))
    forced = open_artifact_store(Settings(state_dir=tmp_path, artifact_fsync=True))
    assert (embedded.durable, postgres.durable, forced.durable) == (False, True, True)
    sha = embedded.put(b"embedded")
    assert synced == [] and embedded.get(sha) == b"embedded"
    postgres.put(b"synced")
    source = tmp_path / "upload.bin"
    source.write_bytes(b"an upload")
    forced.put_file(source)
    assert len(synced) == 2
