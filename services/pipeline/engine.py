"""Runs one pipeline: submits each step when its dependencies have SUCCEEDED, advances on the
steps' events, and ends exactly as its steps do.

Every pass reads the steps' jobs from their services (GetJob: the database is the source of truth)
and submits what is ready; between passes it waits for the steps' events on Kafka (`events`), or
`POLL_S` at most. A step is submitted with the idempotency key `<pipeline job id>:<step>` (a retry:
`...:<step>:retry<n>`), so an execution that resumes after its worker died submits every step again
and gets back the jobs it already made: no step ever runs twice, and nothing is kept outside the
database. Cancelling the pipeline cancels its running steps; a step that FAILED (after its
retries) fails the pipeline with the step's error, its other steps cancelled.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import grpc
from google.protobuf import json_format
from google.rpc import code_pb2
from paperworks.services.pipeline import data
from paperworks.services.pipeline.calls import TenantClient
from paperworks.services.pipeline.dag import Outputs, parse, resolve
from paperworks.services.pipeline.dag.graph import TERMINAL, StepNode, param_field
from paperworks.services.pipeline.dag.refs import Ref, RefError
from paperworks.services.pipeline.events import StepEvents
from paperworks.services.pipeline.picture import render
from paperworks.services.pipeline.spec import RunParams
from paperworks.shared.errors import PaperworksError
from paperworks.shared.sdk.errors import field_violations
from paperworks.shared.sdk.states import PROTO_TO_STATE
from paperworks.shared.tasks.context import JobCancelled, JobContext
from paperworks.v1 import jobs_pb2

log = logging.getLogger(__name__)

POLL_S = 2.0  # the database is read at least this often, whatever Kafka says
# a step's service that is briefly unreachable or at its tenant's quota: try again next pass
TRY_AGAIN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.RESOURCE_EXHAUSTED)


class StepFailed(PaperworksError):
    """The pipeline fails as its step did: the step's error code and message, the step named."""

    def __init__(self, code: str, message: str, field: str):
        super().__init__(message, field)
        self.code = code


@dataclass
class StepRun:
    node: StepNode
    pipeline_id: str
    job: jobs_pb2.Job | None = None
    attempt: int = 0  # which submission (0: the first; n: the n-th retry)
    jobs: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)

    @property
    def state(self) -> str | None:
        return PROTO_TO_STATE[self.job.state] if self.job is not None else None

    @property
    def key(self) -> str:
        base = f"{self.pipeline_id}:{self.node.name}"
        return base if self.attempt == 0 else f"{base}:retry{self.attempt}"

    @property
    def failed(self) -> bool:
        return self.state in ("FAILED", "CANCELLED") and self.attempt >= self.node.retries


class PipelineRun:
    def __init__(self, ctx: JobContext, params: RunParams, client: TenantClient, events: StepEvents):
        self.ctx = ctx
        self.client = client
        self.events = events
        self.dag = parse([s.model_dump() for s in params.steps])
        self.runs = {n.name: StepRun(n, ctx.job_id) for n in self.dag.steps}
        self.outputs: dict[str, Outputs] = {}
        self.artifact_refs: dict[str, dict[str, object]] = {}
        self._reported: tuple | None = None
        self._drawn: dict | None = None

    # --- the loop -------------------------------------------------------------------

    def run(self) -> dict:
        try:
            return self._run()
        except JobCancelled:  # noticed here or by any write of the job's (progress, artifacts)
            self.cancel_active()
            raise

    def _run(self) -> dict:
        while True:
            self.check_cancel()
            self.refresh()
            failed = next((r for r in self.runs.values() if r.failed), None)
            if failed is not None:
                self.fail(failed)
            settled = False  # a step resubmitted after a restart may come back already ended
            for node in self.dag.ready(self.states()):
                settled |= self.submit(self.runs[node.name])
            if all(r.state == "SUCCEEDED" for r in self.runs.values()):
                break
            if settled:
                continue
            self.report()
            self.draw()
            watched = {r.job.id for r in self.runs.values() if r.job is not None} | {self.ctx.job_id}
            for event in self.events.wait(watched, POLL_S):
                self.note(event)
        self.report()
        self.draw()
        return self.result()

    def states(self) -> dict[str, str]:
        return {name: r.state for name, r in self.runs.items() if r.state is not None}

    def note(self, event: dict) -> None:
        """A MODEL_READY event names the model a step announced (the database has it too)."""
        if event.get("type") == "MODEL_READY":
            for run in self.runs.values():
                name = (event.get("artifact") or {}).get("name")
                if run.job is not None and run.job.id == event.get("job_id") and name not in run.models:
                    run.models.append(name)

    # --- steps ----------------------------------------------------------------------

    def refresh(self) -> None:
        for run in self.runs.values():
            if run.job is None or run.state in TERMINAL:
                continue
            try:
                self.observe(run, self.client.get(run.job.id))
            except grpc.RpcError as exc:
                if exc.code() not in TRY_AGAIN:
                    raise
                log.warning("pipeline %s: %s unreachable: %s", self.ctx.job_id, run.node.service,
                            exc.details())

    def observe(self, run: StepRun, job: jobs_pb2.Job) -> None:
        run.job = job
        if job.id not in run.jobs:
            run.jobs.append(job.id)
        state = run.state
        if state == "SUCCEEDED" and run.node.name not in self.outputs:
            self.collect(run)
        elif state in ("FAILED", "CANCELLED") and run.attempt < run.node.retries:
            log.info("pipeline %s: step %s %s (%s), retry %d of %d", self.ctx.job_id, run.node.name,
                     state, job.error.message, run.attempt + 1, run.node.retries)
            run.attempt += 1
            run.job = None  # ready again: submitted under the next key

    def collect(self, run: StepRun) -> None:
        job = run.job
        for event in self.client.watch(job.id, timeout=60):
            if event.type == jobs_pb2.JOB_EVENT_TYPE_MODEL_READY and event.artifact.name not in run.models:
                run.models.append(event.artifact.name)
        self.artifact_refs[run.node.name] = {a.name: a for a in job.artifacts}
        self.outputs[run.node.name] = Outputs(
            job_id=job.id, service=job.service, result=json_format.MessageToDict(job.result),
            artifacts={a.name: a.sha256 for a in job.artifacts}, models=list(run.models))

    def submit(self, run: StepRun) -> bool:
        """Submits the step (or finds the job its key already made); whether that job has ended."""
        node = run.node
        try:
            params = resolve(node.params, self.outputs, lambda ref, out: self.artifact_input(node, ref, out))
        except RefError as exc:
            self.cancel_active()
            raise StepFailed("FAILED_PRECONDITION", f"step {node.name!r}: {exc.message}",
                             param_field(node, exc.path)) from None
        try:
            job = self.client.submit_params(node.service, node.kind, params, run.key)
        except grpc.RpcError as exc:
            if exc.code() in TRY_AGAIN:
                log.warning("pipeline %s: submitting %s: %s", self.ctx.job_id, node.name, exc.details())
                return False
            self.cancel_active()
            named = [f for f, _ in field_violations(exc) if f]
            raise StepFailed(exc.code().name, f"step {node.name!r} was refused by {node.service}: "
                             f"{exc.details()}",
                             param_field(node, named[0]) if named else f"{node.where}.params") from None
        except PaperworksError as exc:  # the parameters do not fit the service's Submit request
            self.cancel_active()
            raise StepFailed(exc.code, f"step {node.name!r}: {exc}", f"{node.where}.params") from None
        log.info("pipeline %s: step %s is %s", self.ctx.job_id, node.name, job.id)
        self.observe(run, job)
        return run.job is None or run.state in TERMINAL

    def artifact_input(self, consumer: StepNode, ref: Ref, out: Outputs) -> dict:
        """`data.artifact_input`: a job artifact within one service, the tenant's upload across."""
        return data.artifact_input(self.ctx.store, self.ctx.tenant, out.service, consumer.service,
                                   out.job_id, self.artifact_refs[ref.step][ref.name])

    # --- ending -------------------------------------------------------------------

    def check_cancel(self) -> None:
        if self.ctx.store.get(None, None, self.ctx.job_id).cancel_requested:
            self.cancelled()

    def cancelled(self):
        self.cancel_active()
        self.draw(force=True)  # may itself raise JobCancelled: run() cancels the steps again, harmless
        raise JobCancelled()

    def cancel_active(self) -> None:
        for run in self.runs.values():
            if run.job is not None and run.state not in TERMINAL:
                log.info("pipeline %s: cancelling step %s (%s)", self.ctx.job_id, run.node.name, run.job.id)
                try:
                    self.observe(run, self.client.cancel(run.job.id))
                except grpc.RpcError as exc:
                    log.warning("pipeline %s: cancelling %s: %s", self.ctx.job_id, run.job.id, exc.details())

    def fail(self, run: StepRun):
        self.cancel_active()
        self.draw(force=True)
        job = run.job
        code = code_pb2.Code.Name(job.error.code) if job.error.code else "ABORTED"
        why = job.error.message or f"the step's job was {run.state.lower()}"
        raise StepFailed(code, f"step {run.node.name!r} ({job.id}) {run.state}: {why}",
                         f"{run.node.where}")

    def report(self) -> None:
        """Progress: steps done over steps, plus the running steps' own progress."""
        total = len(self.runs)
        done = sum(r.state == "SUCCEEDED" for r in self.runs.values())
        running = [r for r in self.runs.values() if r.state in ("QUEUED", "RUNNING")]
        partial = sum(r.job.progress.fraction for r in running)
        fraction = min(1.0, (done + partial) / total)
        message = f"{done}/{total} steps done" + "".join(
            f"; {r.node.name} {r.state.lower()} {r.job.progress.fraction:.0%}" for r in running)
        progress = {"fraction": fraction, "stage": "steps", "step": done, "total_steps": total,
                    "message": message}
        key = (round(fraction, 3), message)
        if key == self._reported:
            return
        self._reported = key
        if self.ctx.store.report_progress(self.ctx.job_id, self.ctx.token, progress):
            self.cancelled()

    def draw(self, force: bool = False) -> None:
        states = {name: r.state or "PENDING" for name, r in self.runs.items()}
        if states == self._drawn and not force:
            return
        self._drawn = states
        try:
            png = render(self.dag, states, title=f"pipeline {self.ctx.job_id}")
        except Exception as exc:  # noqa: BLE001 - a picture never fails a pipeline
            log.warning("pipeline %s: no picture: %s", self.ctx.job_id, exc)
            return
        self.ctx.put_artifact("dag.png", png, "image/png")

    def result(self) -> dict:
        steps = {}
        for name in self.dag.order():
            run, out = self.runs[name], self.outputs.get(name)
            steps[name] = {
                "job_id": run.job.id if run.job else "", "service": run.node.service,
                "kind": run.node.kind, "state": run.state or "PENDING", "attempts": len(run.jobs),
                "jobs": run.jobs,
                "outputs": {"result": out.result, "artifacts": sorted(out.artifacts),
                            "models": out.models} if out else {},
            }
        return {"order": self.dag.order(), "steps": steps,
                "succeeded": sum(s["state"] == "SUCCEEDED" for s in steps.values())}
