"""A tenant's earlier job named in a request (paperworks.shared.job_refs and JobContext): found
only for its own tenant and service, of the named kind and state, its artifact read; every refusal
names the request field. And JobContext.submit: a follow-up job validated and quota-checked like a
Submit RPC, the same job again for the same key."""
from __future__ import annotations

import hashlib

import pytest
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, NotFound, QuotaExceeded
from paperworks.shared.job_refs import finished_job, job_artifact
from paperworks.shared.tasks.context import JobContext

FIELD = "model_job_id"


def digest_job(store, artifacts, *, finish=True, tenant="t1", payload=b"weights"):
    job, _ = store.submit(tenant, "ops", "digest", {"seed": 1, "steps": 1, "rounds_per_step": 1})
    run = store.acquire(job.id, lease_s=30, max_attempts=5)
    sha = artifacts.put(payload)
    store.attach_artifact(job.id, run.token, "model.bin", sha, "application/octet-stream", len(payload))
    if finish:
        store.finish(job.id, run.token, "SUCCEEDED", result={})
    return job, run


def refused(exc_type, fn, *args, **kwargs) -> str:
    with pytest.raises(exc_type) as exc:
        fn(*args, **kwargs)
    assert exc.value.field == FIELD
    return exc.value.message


def test_a_finished_job_and_its_artifact_for_its_own_tenant_only(store, tmp_path):
    artifacts = ArtifactStore(tmp_path / "a")
    job, _ = digest_job(store, artifacts)
    assert finished_job(store, "t1", "ops", job.id, FIELD, kind="digest").id == job.id
    data, sha = job_artifact(store, artifacts, "t1", "ops", job.id, "model.bin", FIELD, kind="digest")
    assert data == b"weights" and artifacts.path(sha).read_bytes() == data
    assert "no ops job" in refused(NotFound, finished_job, store, "t2", "ops", job.id, FIELD)
    assert "no router job" in refused(NotFound, finished_job, store, "t1", "router", job.id, FIELD)
    assert "not train" in refused(InvalidArgument, finished_job, store, "t1", "ops", job.id, FIELD,
                                  kind="train")
    refused(InvalidArgument, finished_job, store, "t1", "ops", "", FIELD)
    assert "no artifact other.bin" in refused(FailedPrecondition, job_artifact, store, artifacts, "t1", "ops",
                                              job.id, "other.bin", FIELD)


def test_an_unfinished_job_is_refused_unless_its_state_is_accepted(store, tmp_path):
    artifacts = ArtifactStore(tmp_path / "a")
    job, _ = digest_job(store, artifacts, finish=False)
    message = refused(FailedPrecondition, finished_job, store, "t1", "ops", job.id, FIELD)
    assert "RUNNING, not SUCCEEDED" in message
    assert finished_job(store, "t1", "ops", job.id, FIELD, states=("SUCCEEDED", "RUNNING")).id == job.id


def test_job_context_reads_its_tenants_jobs_and_submits_follow_ups(store, tmp_path, monkeypatch):
    artifacts = ArtifactStore(tmp_path / "a")
    earlier, _ = digest_job(store, artifacts)
    current, run = digest_job(store, artifacts, finish=False)
    ctx = JobContext(current.id, run.token, run.attempt, store, artifacts)
    assert ctx.job_artifact("ops", earlier.id, "model.bin", FIELD)[0] == b"weights"
    other, _ = digest_job(store, artifacts, tenant="t2")
    refused(NotFound, ctx.finished_job, "ops", other.id, FIELD)

    params = {"seed": 2, "steps": 3, "rounds_per_step": 4}
    follow = ctx.submit("ops", "digest", params, f"chain:{ctx.job_id}")
    assert (follow.tenant, follow.kind, follow.state) == ("t1", "digest", "QUEUED")
    assert ctx.submit("ops", "digest", params, f"chain:{ctx.job_id}").id == follow.id  # redelivered handler
    with pytest.raises(InvalidArgument) as bad:
        ctx.submit("ops", "digest", {**params, "steps": 0}, "other-key")
    assert bad.value.violations[0][0] == "steps"

    from paperworks.shared.config import get_settings

    monkeypatch.setenv("PAPERWORKS_MAX_QUEUED_JOBS_PER_TENANT", "1")
    get_settings.cache_clear()
    try:
        with pytest.raises(QuotaExceeded):
            ctx.submit("ops", "digest", params, "a-third-key")
    finally:
        get_settings.cache_clear()


def test_job_context_device_is_the_setting_else_what_the_worker_sees(store, tmp_path, monkeypatch):
    import torch
    from paperworks.shared.config import get_settings

    artifacts = ArtifactStore(tmp_path / "a")
    job, run = digest_job(store, artifacts, finish=False)
    for setting, expected in (("cpu", "cpu"), ("cuda:1", "cuda:1"),
                              ("", "cuda:0" if torch.cuda.is_available() else "cpu")):
        monkeypatch.setenv("PAPERWORKS_DEVICE", setting)
        get_settings.cache_clear()
        try:
            assert JobContext(job.id, run.token, run.attempt, store, artifacts).device == expected
        finally:
            get_settings.cache_clear()


def test_uploads_are_per_tenant_expire_unless_pinned_and_respect_the_quota(store, tmp_path):
    import time

    from paperworks.shared.db.uploads import UploadStore

    uploads = UploadStore(store.db)
    a, b = "a" * 64, "b" * 64
    uploads.record("t1", a, "x.bin", "application/octet-stream", 10, ttl_s=3600, quota_bytes=25)
    uploads.record("t1", a, "x.bin", "application/octet-stream", 10, ttl_s=3600, quota_bytes=25)  # again
    assert uploads.held_bytes("t1") == 10 and uploads.get("t1", a, "f").name == "x.bin"
    with pytest.raises(NotFound):
        uploads.get("t2", a, "f")
    with pytest.raises(QuotaExceeded):
        uploads.record("t1", b, "y.bin", "application/octet-stream", 20, ttl_s=3600, quota_bytes=25)
    uploads.record("t2", a, "x.bin", "application/octet-stream", 10, ttl_s=0.01)
    uploads.record("t2", b, "y.bin", "application/octet-stream", 10, ttl_s=0.01)
    uploads.pin("t2", b)
    time.sleep(0.05)
    with pytest.raises(NotFound):
        uploads.get("t2", a, "f")  # expired
    assert uploads.get("t2", b, "f").pinned  # a job uses it: it stays
    assert uploads.sweep_expired() == []  # a is still t1's upload: its blob stays
    uploads.record("t1", a, "x.bin", "application/octet-stream", 10, ttl_s=0.01)
    time.sleep(0.05)
    assert uploads.sweep_expired() == [a]


def test_an_input_resolves_from_each_source_for_its_tenant_only(store, tmp_path, monkeypatch, s3_endpoint):
    import io
    import tarfile

    import boto3
    from paperworks.shared.config import get_settings
    from paperworks.shared.db.uploads import UploadStore
    from paperworks.shared.inputs import InputRefParams, resolve_input

    monkeypatch.setenv("PAPERWORKS_STATE_DIR", str(tmp_path / "state"))
    get_settings.cache_clear()
    artifacts = ArtifactStore(tmp_path / "a")
    earlier, _ = digest_job(store, artifacts, payload=b"model bytes")
    current, run = digest_job(store, artifacts, finish=False)
    ctx = JobContext(current.id, run.token, run.attempt, store, artifacts)
    try:
        # an upload: a file under its own name, and an archive that unpacks into a folder
        volume = artifacts.put(b"nifti-ish")
        UploadStore(store.db).record("t1", volume, "ct.nii.gz", "application/gzip", 9, ttl_s=3600)
        path = resolve_input(InputRefParams(upload=volume), ctx, "ops", "image")
        assert path.name == "ct.nii.gz" and path.read_bytes() == b"nifti-ish"
        assert UploadStore(store.db).get("t1", volume, "f").pinned  # used by a job: kept
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w:gz") as tar:
            info = tarfile.TarInfo("config.json")
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
        folder_sha = artifacts.put(packed.getvalue())
        UploadStore(store.db).record("t1", folder_sha, "model.tar.gz", "application/gzip", 1, ttl_s=3600)
        folder = resolve_input(InputRefParams(upload=folder_sha), ctx, "ops", "model", unpack=True)
        assert (folder / "config.json").read_text() == "{}"
        # another tenant's upload is not there
        UploadStore(store.db).record("t2", artifacts.put(b"theirs"), "x", "y", 6, ttl_s=3600)
        with pytest.raises(NotFound) as exc:
            resolve_input(InputRefParams(upload=hashlib.sha256(b"theirs").hexdigest()), ctx, "ops", "image")
        assert exc.value.field == "image.upload"
        # an artifact of an earlier job of the tenant
        ref = InputRefParams(artifact={"job_id": earlier.id, "name": "model.bin"})
        assert resolve_input(ref, ctx, "ops", "model").read_bytes() == b"model bytes"
        # an s3:// object, only from a listed bucket
        url, bucket = s3_endpoint
        monkeypatch.setenv("PAPERWORKS_S3_ENDPOINT_URL", url)
        get_settings.cache_clear()
        boto3.client("s3", endpoint_url=url).put_object(Bucket=bucket, Key="data/cases.csv", Body=b"a,b")
        with pytest.raises(InvalidArgument) as exc:
            resolve_input(InputRefParams(uri=f"s3://{bucket}/data/cases.csv"), ctx, "ops", "dataset")
        assert exc.value.field == "dataset.uri"
        monkeypatch.setenv("PAPERWORKS_INPUT_S3_BUCKETS", bucket)
        get_settings.cache_clear()
        got = resolve_input(InputRefParams(uri=f"s3://{bucket}/data/cases.csv"), ctx, "ops", "dataset")
        assert got.name == "cases.csv" and got.read_bytes() == b"a,b"
        # exactly one source
        with pytest.raises(ValueError):
            InputRefParams(upload=volume, path="/x")
    finally:
        get_settings.cache_clear()
