"""Pipelines through the real stack (Tansu, Redis, SQLite, Celery workers): steps submitted as
their dependencies succeed, results feeding parameters, the steps in the tenant's job lists linked
to their pipeline, refusals naming the step's field with nothing created, cancel propagating."""
from __future__ import annotations

import grpc
import pytest
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from support import TOKENS, chain, finished

TWO_DIGESTS = [
    {"name": "first", "service": "ops", "kind": "digest",
     "params": {"seed": 7, "steps": 3, "rounds_per_step": 200}},
    {"name": "second", "service": "ops", "kind": "digest",
     "params": {"seed": 8, "steps": {"from": "first", "result": "steps"}, "rounds_per_step": 100}},
]


def jobs_of(client, service):
    return client.list(service, page_size=500)[0]


def test_a_result_feeds_the_next_step_and_the_steps_link_to_their_pipeline(client, tmp_path):
    run = finished(client, client.run_pipeline(TWO_DIGESTS), timeout=120)
    steps = run.result["steps"]
    assert run.result["order"] == ["first", "second"] and run.result["succeeded"] == 2
    second = client.get(steps["second"]["job_id"])
    assert second.params["steps"] == 3  # the first step's result, filled in at submit
    assert second.result["digest"] == chain(8, 3, 100)[-1]
    assert steps["first"]["outputs"]["result"]["digest"] == chain(7, 3, 200)[-1]
    assert steps["second"]["outputs"]["artifacts"] == ["checkpoints.json"]
    # the steps are the tenant's own jobs, keyed by the pipeline and linked to it
    mine = {j.id: j for j in jobs_of(client, "ops")}
    for name in ("first", "second"):
        job = mine[steps[name]["job_id"]]
        assert job.parent_job_id == run.id and job.idempotency_key == f"{run.id}:{name}"
    with Client(endpoints=client.endpoints, token=TOKENS["bob"]) as bob:
        assert not {j.id for j in jobs_of(bob, "ops")} & set(mine)
    assert run.progress.fraction == 1.0
    [picture] = [a for a in run.artifacts if a.name == "dag.png"]
    png = client.pull_artifact(run.id, picture.sha256, tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("steps, field, code", [
    ([{**TWO_DIGESTS[0], "params": {"seed": 1, "steps": 0, "rounds_per_step": 1}}],
     "steps[0].params.steps", grpc.StatusCode.INVALID_ARGUMENT),
    ([TWO_DIGESTS[0], {**TWO_DIGESTS[1], "params": {**TWO_DIGESTS[1]["params"], "bits": 2}}],
     "steps[1].params", grpc.StatusCode.INVALID_ARGUMENT),
    ([{**TWO_DIGESTS[0], "service": "nope"}], "steps[0].service", grpc.StatusCode.INVALID_ARGUMENT),
    ([{**TWO_DIGESTS[0], "kind": "train"}], "steps[0].kind", grpc.StatusCode.INVALID_ARGUMENT),
    ([TWO_DIGESTS[0], {**TWO_DIGESTS[1], "params": {**TWO_DIGESTS[1]["params"],
                                                    "steps": {"from": "first", "result": "nope"}}}],
     "steps[1].params.steps.result", grpc.StatusCode.INVALID_ARGUMENT),
    ([{**TWO_DIGESTS[0], "params": {**TWO_DIGESTS[0]["params"], "seed": {"from": "second", "job_id": True}}},
      TWO_DIGESTS[1]], "steps[", grpc.StatusCode.INVALID_ARGUMENT),  # a cycle
    # a job the step names is looked up as its submit would (before its inputs, in that order)
    ([{"name": "x", "service": "segmenter", "kind": "segment",
       "params": {"model_job_id": "segmenter-1", "image": {"upload": "ab" * 32}}}],
     "steps[0].params.model_job_id", grpc.StatusCode.NOT_FOUND),
    # one an earlier step will make is not, the step's other inputs are
    ([{"name": "fit", "service": "segmenter", "kind": "fit_minor_params",
       "params": {"dataset": {"synthetic": {}}}},
      {"name": "train", "service": "segmenter", "kind": "train_segmenter",
       "params": {"minor_job_id": {"from": "fit", "job_id": True}, "dataset": {"synthetic": {}}}},
      {"name": "x", "service": "segmenter", "kind": "segment",
       "params": {"model_job_id": {"from": "train", "job_id": True}, "image": {"upload": "ab" * 32}}}],
     "steps[2].params.image.upload", grpc.StatusCode.NOT_FOUND),
])
def test_invalid_pipelines_are_refused_naming_the_step_and_field_and_nothing_is_created(
        client, steps, field, code):
    before = {s: len(jobs_of(client, s)) for s in ("pipeline", "ops", "segmenter")}
    for attempt in (lambda: client.run_pipeline(steps), lambda: client.validate_pipeline(steps)):
        with pytest.raises(grpc.RpcError) as exc:
            attempt()
        assert exc.value.code() == code, exc.value.details()
        assert field_violations(exc.value)[0][0].startswith(field), field_violations(exc.value)
    assert {s: len(jobs_of(client, s)) for s in before} == before


def test_validate_answers_the_run_order(client):
    assert client.validate_pipeline(list(reversed(TWO_DIGESTS))) == ["first", "second"]


def test_cancelling_the_pipeline_cancels_its_running_step(client):
    slow = [{"name": "slow", "service": "ops", "kind": "digest",
             "params": {"seed": 1, "steps": 2000, "rounds_per_step": 20000}},
            {"name": "after", "service": "ops", "kind": "digest",
             "params": {"seed": 2, "steps": 1, "rounds_per_step": 1}, "after": ["slow"]}]
    run = client.run_pipeline(slow)
    for event in client.watch(run.id, timeout=60):
        if "slow running" in event.progress.message:
            break
    client.cancel(run.id)
    ended = client.wait(run.id, timeout=60)
    assert PROTO_TO_STATE[ended.state] == "CANCELLED"
    steps = [j for j in jobs_of(client, "ops") if j.parent_job_id == run.id]
    assert [j.idempotency_key for j in steps] == [f"{run.id}:slow"]
    assert PROTO_TO_STATE[client.wait(steps[0].id, timeout=60).state] == "CANCELLED"


def test_a_failed_step_fails_the_pipeline_with_its_error_and_nothing_after_it_runs(client):
    """The denoise step names an ops job as its denoiser: fine by shape at submission, refused by
    the segmenter once the ops job exists; the pipeline ends FAILED naming the step."""
    steps = [TWO_DIGESTS[0],
             {"name": "bad", "service": "segmenter", "kind": "denoise",
              "params": {"model_job_id": {"from": "first", "job_id": True},
                         "dataset": {"synthetic": {"count": 1, "size": 16}}}},
             {"name": "next", "service": "ops", "kind": "digest", "after": ["bad"],
              "params": {"seed": 2, "steps": 1, "rounds_per_step": 1}}]
    run = client.wait(client.run_pipeline(steps).id, timeout=120)
    assert PROTO_TO_STATE[run.state] == "FAILED"
    assert run.error.field_violations[0].field == "steps[1].params.model_job_id"
    assert run.error.message.startswith("step 'bad' was refused by segmenter: model_job_id: no segmenter job")
    assert not [j for j in jobs_of(client, "ops") if j.idempotency_key == f"{run.id}:next"]


def test_the_cli_validates_and_runs_a_pipeline_file(client, tmp_path):
    import json
    import os
    import subprocess
    import sys

    import yaml

    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERWORKS_")}
    env.update(PAPERWORKS_ENDPOINTS=",".join(f"{n}={a}" for n, a in client.endpoints.items()),
               PAPERWORKS_TOKEN=TOKENS["alice"])

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "paperworks.shared.sdk.cli", "pipeline", *args], env=env,
                              capture_output=True, text=True, timeout=120)

    good = tmp_path / "two.yaml"
    good.write_text(yaml.safe_dump({"steps": TWO_DIGESTS}))
    checked = cli("validate", str(good))
    assert checked.returncode == 0 and "first -> second" in checked.stdout, checked.stderr
    ran = cli("run", str(good), "--watch")
    assert ran.returncode == 0 and "SUCCEEDED" in ran.stdout, ran.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [{**TWO_DIGESTS[0], "kind": "nope"}]}))
    refused = cli("run", str(bad))
    assert refused.returncode != 0 and "steps[0].kind" in refused.stderr


def validate_job(client, service, kind, params, deferred=()):
    from google.protobuf import json_format, struct_pb2
    from paperworks.v1 import jobs_pb2

    request = jobs_pb2.ValidateJobRequest(kind=kind, params=struct_pb2.Struct(),
                                          deferred_inputs=list(deferred))
    request.params.update(params)
    reply = client.jobs(service).ValidateJob(request, metadata=client.metadata, timeout=60)
    return json_format.MessageToDict(reply.params)


def test_validate_job_makes_the_checks_a_submit_makes_and_writes_nothing(client):
    """ValidateJob runs the service's own Submit<Kind> without writing: a job the request names
    is looked up (the service's check, which the kind's parameter model cannot make), unless an
    earlier pipeline step will make it."""
    ghost = "segmenter-" + "f" * 32
    params = {"model_job_id": ghost, "dataset": {"synthetic": {}}}
    before = len(jobs_of(client, "segmenter"))
    with pytest.raises(grpc.RpcError) as exc:
        validate_job(client, "segmenter", "segment", params)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND
    assert field_violations(exc.value)[0][0] == "model_job_id"
    with pytest.raises(grpc.RpcError) as submitted:  # the same answer as the submit's
        client.submit("segmenter", "segment", **params)
    assert (submitted.value.code(), submitted.value.details()) == (exc.value.code(), exc.value.details())
    checked = validate_job(client, "segmenter", "segment", params, deferred=["model_job_id"])
    assert checked["model_job_id"] == ghost and checked["threshold"] == 0.5  # defaults filled in
    assert validate_job(client, "ops", "digest", {"seed": 3, "steps": 2, "rounds_per_step": 5}) == {
        "seed": 3, "steps": 2, "rounds_per_step": 5, "fail_once_at_step": 0}
    assert len(jobs_of(client, "segmenter")) == before
