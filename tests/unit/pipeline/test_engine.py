"""The pipeline engine against simulated services: steps submitted as their dependencies succeed,
outputs filled in, an execution that dies resumes without making any job twice, retries, a failed
step failing the pipeline with its error, cancel propagating. (Through the real stack:
tests/integration/pipeline.)"""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from google.rpc import code_pb2
from paperworks.services.pipeline.engine import PipelineRun, StepFailed
from paperworks.services.pipeline.spec import RunParams
from paperworks.shared.tasks.context import JobCancelled
from paperworks.v1 import common_pb2, jobs_pb2

S = jobs_pb2


class Services:
    """Jobs that run for `ticks` GetJob calls, then end as `outcome(kind, params, attempt)` says; an
    idempotency key finds the job it made (as JobStore.submit does)."""

    def __init__(self, ticks=2, outcome=None):
        self.jobs: dict[str, jobs_pb2.Job] = {}
        self.by_key: dict[str, str] = {}
        self.created = Counter()
        self.ticks = ticks
        self.left: dict[str, int] = {}
        self.outcome = outcome or (lambda job: "ok")
        self.cancelled: list[str] = []

    def submit_params(self, service, kind, params, key):
        if key in self.by_key:
            return self.jobs[self.by_key[key]]
        job_id = f"{service}-{len(self.jobs):032d}"
        job = jobs_pb2.Job(id=job_id, service=service, kind=kind, state=S.JOB_STATE_QUEUED,
                           idempotency_key=key)
        job.params.update(params)
        self.jobs[job_id], self.by_key[key] = job, job_id
        self.created[key] += 1
        self.left[job_id] = self.ticks
        return job

    def get(self, job_id):
        job = self.jobs[job_id]
        if job.state in (S.JOB_STATE_QUEUED, S.JOB_STATE_RUNNING):
            self.left[job_id] -= 1
            job.state = S.JOB_STATE_RUNNING
            job.progress.fraction = 0.5
            if self.left[job_id] <= 0:
                if self.outcome(job) == "ok":
                    job.state = S.JOB_STATE_SUCCEEDED
                    job.result.update({"steps": int(job.params["steps"]) + 1 if "steps" in job.params else 1})
                    job.artifacts.append(common_pb2.ArtifactRef(name="out.bin", sha256="a" * 64))
                else:
                    job.state = S.JOB_STATE_FAILED
                    job.error.code, job.error.message = code_pb2.INVALID_ARGUMENT, "steps: too many"
        return job

    def watch(self, job_id, timeout=None):
        return iter([jobs_pb2.JobEvent(type=S.JOB_EVENT_TYPE_MODEL_READY,
                                       artifact=common_pb2.ArtifactRef(name="out.bin"))])

    def cancel(self, job_id):
        self.cancelled.append(job_id)
        self.jobs[job_id].state = S.JOB_STATE_CANCELLED
        return self.jobs[job_id]


class Context:
    def __init__(self):
        self.job_id, self.token, self.tenant = "pipeline-p", "t", "alice"
        self.cancel = False
        self.progress: list[dict] = []
        self.pictures = 0
        self.store = SimpleNamespace(get=lambda *_: SimpleNamespace(cancel_requested=self.cancel),
                                     report_progress=self._report)

    def _report(self, job_id, token, progress):
        self.progress.append(progress)
        return self.cancel

    def put_artifact(self, name, data, media_type):
        assert name == "dag.png" and data[:4] == b"\x89PNG"
        self.pictures += 1


class Events:
    def __init__(self, die_after=None):
        self.waits, self.die_after = 0, die_after

    def wait(self, job_ids, timeout_s):
        self.waits += 1
        if self.die_after is not None and self.waits >= self.die_after:
            raise SystemExit("worker killed")
        return []


def params(*steps):
    return RunParams.model_validate({"steps": list(steps)})


def digest(name, steps=1, after=(), **extra):
    return {"name": name, "service": "ops", "kind": "digest", "after": list(after),
            "params": {"seed": 1, "steps": steps, "rounds_per_step": 1}, **extra}


CHAIN = params(digest("a", 2), {**digest("b"), "params": {"seed": 1, "rounds_per_step": 1,
                                                         "steps": {"from": "a", "result": "steps"}}},
               digest("c", after=["a"]), digest("d", after=["b", "c"]))


def test_steps_run_in_dependency_order_with_outputs_filled_in():
    services, ctx = Services(), Context()
    result = PipelineRun(ctx, CHAIN, services, Events()).run()
    assert result["succeeded"] == 4 and list(result["steps"]) == ["a", "b", "c", "d"]
    b = services.jobs[result["steps"]["b"]["job_id"]]
    assert b.params["steps"] == 3  # a's result (2 + 1)
    assert set(services.created) == {f"pipeline-p:{s}" for s in "abcd"}
    assert result["steps"]["a"]["outputs"] == {"result": {"steps": 3.0}, "artifacts": ["out.bin"],
                                               "models": ["out.bin"]}
    fractions = [p["fraction"] for p in ctx.progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and 0 < fractions[1] < 1
    assert ctx.pictures >= 3


def test_an_execution_that_dies_resumes_without_making_any_job_twice():
    services = Services(ticks=3)
    with pytest.raises(SystemExit):
        PipelineRun(Context(), CHAIN, services, Events(die_after=4)).run()
    made = dict(services.created)
    assert 0 < len(made) < 4
    result = PipelineRun(Context(), CHAIN, services, Events()).run()
    assert result["succeeded"] == 4
    assert all(n == 1 for n in services.created.values()) and len(services.created) == 4


def test_a_step_is_retried_under_a_new_key_then_the_pipeline_goes_on():
    services = Services(outcome=lambda job: "fail" if job.idempotency_key == "pipeline-p:a" else "ok")
    result = PipelineRun(Context(), params(digest("a", retries=2), digest("b", after=["a"])), services,
                         Events()).run()
    assert result["steps"]["a"]["attempts"] == 2 and result["steps"]["a"]["state"] == "SUCCEEDED"
    assert set(services.created) == {"pipeline-p:a", "pipeline-p:a:retry1", "pipeline-p:b"}


def test_a_failed_step_fails_the_pipeline_with_its_error_and_cancels_the_others():
    services = Services(outcome=lambda job: "fail" if job.idempotency_key.endswith(":a") else "ok")
    services.ticks = 1
    slow = digest("slow")
    with pytest.raises(StepFailed) as exc:
        PipelineRun(Context(), params(digest("a"), slow, digest("b", after=["a"])), services, Events()).run()
    assert exc.value.code == "INVALID_ARGUMENT" and exc.value.field == "steps[0]"
    assert "step 'a'" in exc.value.message and "steps: too many" in exc.value.message
    assert "pipeline-p:b" not in services.created


def test_cancel_reaches_the_running_steps():
    services, ctx = Services(ticks=100), Context()
    events = Events()
    run = PipelineRun(ctx, params(digest("a"), digest("b")), services, events)
    original = events.wait

    def cancel_later(job_ids, timeout_s):
        ctx.cancel = events.waits >= 1
        return original(job_ids, timeout_s)

    events.wait = cancel_later
    with pytest.raises(JobCancelled):
        run.run()
    assert sorted(services.cancelled) == sorted(services.jobs)
