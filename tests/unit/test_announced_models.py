"""A model another service's job announced, found through the job store: only a SUCCEEDED job of
the same tenant on the named service that announced one, and every refusal names the field."""
from __future__ import annotations

import pytest
from paperworks.shared import registry
from paperworks.shared.announced import announced_model, load_announced
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, NotFound

REF = {"sha256": "d" * 64, "name": "model.safetensors", "media_type": "application/octet-stream",
       "size_bytes": 7}
FIELD = "local.quantize_job_id"


def quantize_job(store, *, announce=True, finish=True, tenant="t1"):
    job, _ = store.submit(tenant, "quantizer", "quantize", {"seed": 1})
    run = store.acquire(job.id, lease_s=30, max_attempts=5)
    store.attach_artifact(job.id, run.token, REF["name"], REF["sha256"], REF["media_type"], 7)
    if announce:
        store.announce_model(job.id, run.token, REF, "2-bit checkpoint")
    if finish:
        store.finish(job.id, run.token, "SUCCEEDED", result={})
    return job


def refusal(exc_type, fn, *args) -> str:
    with pytest.raises(exc_type) as exc:
        fn(*args)
    assert exc.value.field == FIELD
    return exc.value.message


def test_the_announced_artifact_of_a_finished_job_of_the_same_tenant(store):
    job = quantize_job(store)
    found, artifact = announced_model(store, "t1", "quantizer", job.id, FIELD)
    assert found.id == job.id and artifact == REF
    assert "no quantizer job" in refusal(NotFound, announced_model, store, "t2", "quantizer", job.id, FIELD)
    assert "no router job" in refusal(NotFound, announced_model, store, "t1", "router", job.id, FIELD)
    refusal(NotFound, announced_model, store, "t1", "quantizer", "no-such-job", FIELD)
    refusal(InvalidArgument, announced_model, store, "t1", "quantizer", "", FIELD)


def test_unfinished_or_silent_jobs_and_services_without_a_loader_are_refused(store):
    running = quantize_job(store, finish=False)
    assert "RUNNING, not SUCCEEDED" in refusal(FailedPrecondition, announced_model, store, "t1", "quantizer",
                                               running.id, FIELD)
    silent = quantize_job(store, announce=False)
    assert "announced no model" in refusal(FailedPrecondition, announced_model, store, "t1", "quantizer",
                                           silent.id, FIELD)
    assert registry.services()["ops"].model_loader is None
    assert "announces no models" in refusal(FailedPrecondition, load_announced, store, None, "t1", "ops",
                                            silent.id, FIELD)
    assert callable(registry.load(registry.services()["quantizer"].model_loader))
