"""What a job handler sees: its parameters' job, progress reporting, artifacts, cancellation.

Handlers stay free of Celery and of the database: they call `ctx.progress(...)`
per step, and that call is where cancellation and a lost lease surface.

Events are buffered: progress, attached artifacts and announced models are
written together, in the order they happened, at most once per
`min_interval_s` (the progress throttle; the claim counts as a write) and
otherwise inside the job's final write. A trivial job is then two write
transactions, its claim and its end; a long job writes every `min_interval_s`,
and cancellation is seen at the first write after it was asked for. Of several
buffered reports of one stage only the newest is kept; a stage's last report
(step = total) is always written.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import cached_property

from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.db.jobs import PROGRESS, JobStore, Pending
from paperworks.shared.errors import Cancelled

WRITE_INTERVAL_S = 0.05  # the progress throttle: a running job writes at most this often


class JobCancelled(Cancelled):
    def __init__(self):
        super().__init__("cancelled on request")


@dataclass
class JobContext:
    job_id: str
    token: str
    attempt: int
    store: JobStore
    artifacts: ArtifactStore
    min_interval_s: float = field(default_factory=lambda: WRITE_INTERVAL_S)
    _last_write: float = field(default_factory=time.monotonic)  # created right after the claim
    _pending: list[Pending] = field(default_factory=list)
    _attached: dict[str, str] = field(default_factory=dict)  # name -> sha256, this execution's

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"paperworks.job.{self.job_id}")

    @cached_property
    def device(self) -> str:
        """Where this job's method runs (`paperworks.shared.devices.device`)."""
        from paperworks.shared.devices import device

        return device()

    @cached_property
    def tenant(self) -> str:
        """Whose job this is: the jobs and models it may name are that tenant's only."""
        return self.store.get(None, None, self.job_id).tenant

    def load_announced_model(self, service: str, job_id: str, field: str):
        """(artifact, backend) of the model that this tenant's `service` job announced
        (`paperworks.shared.announced`); refusals name `field`."""
        from paperworks.shared.announced import load_announced

        return load_announced(self.store, self.artifacts, self.tenant, service, job_id, field)

    def finished_job(self, service: str, job_id: str, field: str, kind: str | None = None,
                     states=("SUCCEEDED",)):
        """This tenant's earlier job (`paperworks.shared.job_refs.finished_job`)."""
        from paperworks.shared.job_refs import finished_job

        return finished_job(self.store, self.tenant, service, job_id, field, kind, states)

    def job_artifact(self, service: str, job_id: str, name: str, field: str,
                     kind: str | None = None) -> tuple[bytes, str]:
        """(bytes, sha256) of artifact `name` of this tenant's SUCCEEDED `service` job."""
        from paperworks.shared.job_refs import job_artifact

        return job_artifact(self.store, self.artifacts, self.tenant, service, job_id, name, field, kind)

    def submit(self, service: str, kind: str, params: dict, idempotency_key: str):
        """Submits a follow-up job for this tenant, as `Submit<Kind>` would: parameters validated
        by the kind's spec, the tenant's quotas applied, the job and its intake record written in
        one transaction (the outbox relay publishes it). Returns the Job row; the key makes a
        redelivered handler find the same job instead of submitting twice."""
        from paperworks.shared import registry
        from paperworks.shared.config import get_settings
        from paperworks.shared.db import quotas
        from paperworks.shared.errors import violations_from_pydantic
        from pydantic import ValidationError

        try:
            valid = registry.service(service).kind(kind).params.model_validate(params)
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        settings = get_settings()
        quotas.check_submit(self.store.db, self.tenant, service, idempotency_key,
                            settings.max_queued_jobs_per_tenant, settings.max_active_jobs_per_tenant)
        job, _ = self.store.submit(self.tenant, service, kind, valid.model_dump(mode="json"),
                                   idempotency_key)
        return job

    def progress(
        self,
        step: int,
        total_steps: int,
        stage: str = "",
        message: str = "",
    ) -> None:
        """Records progress (buffered, see the module docstring); raises JobCancelled when
        cancellation was requested."""
        fraction = min(1.0, step / total_steps) if total_steps else 0.0
        report = Pending.progress({"fraction": fraction, "stage": stage, "step": step,
                                   "total_steps": total_steps, "message": message})
        last = self._pending[-1].payload["progress"] if self._pending and \
            self._pending[-1].type == PROGRESS else None
        if last is not None and last["stage"] == stage and last["step"] < last["total_steps"]:
            self._pending[-1] = report  # a stage's newer report supersedes its unwritten one
        else:
            self._pending.append(report)  # a stage's last report is always written
        self._write_if_due()

    def put_artifact(self, name: str, data: bytes, media_type: str) -> dict:
        sha = self.artifacts.put(data)
        ref = {"sha256": sha, "name": name, "media_type": media_type, "size_bytes": len(data)}
        self._attached[name] = sha
        self._pending.append(Pending.artifact(ref))
        self._write_if_due()
        return ref

    def put_json(self, name: str, obj) -> dict:
        return self.put_artifact(name, json.dumps(obj, indent=1).encode(), "application/json")

    def announce_model(self, artifact: dict, message: str) -> None:
        """Tells other services (a MODEL_READY event on `paperworks.events`) that `artifact`, a
        reference `put_artifact` returned, is a model they can load; `message` says what it is."""
        if self._attached.get(artifact.get("name")) != artifact.get("sha256"):
            raise ValueError(f"job {self.job_id} has no artifact {artifact.get('name')} "
                             f"with sha256 {artifact.get('sha256')} to announce")
        self._pending.append(Pending.model(artifact, message))
        self._write_if_due()

    def take_pending(self) -> list[Pending]:
        """The events not written yet, for the job's final write (the runner's `finish`)."""
        pending, self._pending = self._pending, []
        return pending

    def _write_if_due(self) -> None:
        now = time.monotonic()
        if now - self._last_write < self.min_interval_s:
            return
        self._last_write = now
        if self.store.record(self.job_id, self.token, self.take_pending()):
            raise JobCancelled()
