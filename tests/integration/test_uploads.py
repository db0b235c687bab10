"""UploadArtifact against a real stack: a ~50 MB file in 1 MiB chunks and a folder as an archive,
stored content-addressed for their tenant only; oversize uploads, uploads past the tenant's quota,
damaged bytes and malformed streams get their precise status and leave nothing behind."""
from __future__ import annotations

import hashlib
import os

import grpc
import pytest
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.db.engine import Database
from paperworks.shared.db.uploads import UploadStore
from paperworks.shared.errors import NotFound
from paperworks.shared.inputs import unpack_archive
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from paperworks.v1 import jobs_pb2
from support import TOKENS, start_stack

MB = 1024 * 1024


@pytest.fixture(scope="module")
def upload_stack(tmp_path_factory):
    state = tmp_path_factory.mktemp("upload-stack")
    stack = start_stack(state, PAPERWORKS_MAX_UPLOAD_BYTES=str(60 * MB),
                        PAPERWORKS_UPLOAD_QUOTA_BYTES=str(70 * MB))
    stack.state_dir = state
    yield stack
    stack.down()


def client_for(stack, who):
    return Client(endpoints=stack.endpoints, token=TOKENS[who])


def test_a_large_file_arrives_whole_and_is_its_tenants_only(upload_stack, tmp_path):
    source = tmp_path / "volume.bin"
    source.write_bytes(os.urandom(50 * MB))
    sent = []
    with client_for(upload_stack, "alice") as alice:
        reply = alice.upload(source, progress=lambda done, total: sent.append((done, total)))
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    assert (reply.artifact.sha256, reply.artifact.size_bytes, reply.artifact.name) == (sha, 50 * MB,
                                                                                         "volume.bin")
    assert len(sent) == 50 and sent[-1] == (50 * MB, 50 * MB)
    blobs = ArtifactStore(upload_stack.state_dir / "artifacts")
    assert blobs.size(sha) == 50 * MB and hashlib.sha256(blobs.get(sha)).hexdigest() == sha
    uploads = UploadStore(Database(upload_stack.database_url))
    assert uploads.get("alice", sha, "input").size_bytes == 50 * MB
    with pytest.raises(NotFound):
        uploads.get("bob", sha, "input")

    # past the tenant's quota (70 MB held at most): refused, nothing recorded or stored
    more = tmp_path / "more.bin"
    more.write_bytes(os.urandom(30 * MB))
    with client_for(upload_stack, "alice") as alice, pytest.raises(grpc.RpcError) as exc:
        alice.upload(more)
    assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "QUOTA" in exc.value.details()
    more_sha = hashlib.sha256(more.read_bytes()).hexdigest()
    assert not blobs.exists(more_sha)
    with pytest.raises(NotFound):
        uploads.get("alice", more_sha, "input")
    with client_for(upload_stack, "bob") as bob:  # another tenant has its own quota
        assert bob.upload(more).artifact.sha256 == more_sha


def test_a_folder_travels_as_an_archive_that_unpacks_safely(upload_stack, tmp_path):
    folder = tmp_path / "tiny-model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "sub" / "weights.bin").write_bytes(b"\x00\x01" * 1000)
    with client_for(upload_stack, "bob") as bob:
        reply = bob.upload(folder)
    assert reply.artifact.name == "tiny-model.tar.gz" and reply.artifact.media_type == "application/gzip"
    blob = ArtifactStore(upload_stack.state_dir / "artifacts").path(reply.artifact.sha256)
    out = unpack_archive(blob, tmp_path / "unpacked", "model.upload")
    assert (out / "config.json").read_text() == '{"model_type": "llama"}'
    assert (out / "sub" / "weights.bin").read_bytes() == b"\x00\x01" * 1000


def test_oversize_damaged_and_malformed_uploads_are_refused_precisely(upload_stack, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(b"\x07" * (61 * MB))
    with client_for(upload_stack, "bob") as bob:
        with pytest.raises(grpc.RpcError) as exc:
            bob.upload(big)
        assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "PAPERWORKS_MAX_UPLOAD_BYTES" in exc.value.details()
        assert not ArtifactStore(upload_stack.state_dir / "artifacts").exists(
            hashlib.sha256(big.read_bytes()).hexdigest())

        stub = bob.jobs("ops")

        def send(*messages):
            with pytest.raises(grpc.RpcError) as refused:
                stub.UploadArtifact(iter(messages), metadata=bob.metadata, timeout=30)
            return refused.value

        data = jobs_pb2.UploadArtifactRequest(data=b"abc")
        no_header = send(data)
        assert no_header.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field_violations(no_header)[0][0] == "header"
        bad_name = send(jobs_pb2.UploadArtifactRequest(header=jobs_pb2.UploadHeader(name="../x")), data)
        assert field_violations(bad_name)[0][0] == "header.name"
        wrong_sha = jobs_pb2.UploadHeader(name="x", sha256="0" * 64)
        damaged = send(jobs_pb2.UploadArtifactRequest(header=wrong_sha), data)
        assert field_violations(damaged)[0][0] == "header.sha256"
        empty = send(jobs_pb2.UploadArtifactRequest(header=jobs_pb2.UploadHeader(name="x")))
        assert field_violations(empty)[0][0] == "data"
    with Client(endpoints=upload_stack.endpoints, token="wrong") as nobody, \
            pytest.raises(grpc.RpcError) as exc:
        nobody.upload(big)
    assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert UploadStore(Database(upload_stack.database_url)).held_bytes("bob") < 61 * MB
