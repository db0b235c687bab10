"""Database rows ↔ API messages for the jobs surface."""
from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from paperworks.shared.db.models import Job, JobArtifact, JobEvent
from paperworks.shared.sdk.states import PROTO_TO_STATE, STATE_TO_PROTO  # noqa: F401 - re-exported
from paperworks.v1 import common_pb2, jobs_pb2

EVENT_TYPES = {
    "STATE_CHANGED": jobs_pb2.JOB_EVENT_TYPE_STATE_CHANGED,
    "PROGRESS": jobs_pb2.JOB_EVENT_TYPE_PROGRESS,
    "ARTIFACT_ADDED": jobs_pb2.JOB_EVENT_TYPE_ARTIFACT_ADDED,
    "CANCEL_REQUESTED": jobs_pb2.JOB_EVENT_TYPE_CANCEL_REQUESTED,
    "RETRYING": jobs_pb2.JOB_EVENT_TYPE_RETRYING,
    "MODEL_READY": jobs_pb2.JOB_EVENT_TYPE_MODEL_READY,
}


def timestamp(dt: datetime | None) -> timestamp_pb2.Timestamp | None:
    if dt is None:
        return None
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(dt if dt.tzinfo else dt.replace(tzinfo=UTC))
    return ts


def struct(d: dict | None) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    if d:
        s.update(d)
    return s


def artifact_ref(a: JobArtifact | dict) -> common_pb2.ArtifactRef:
    if isinstance(a, dict):
        return common_pb2.ArtifactRef(**a)
    return common_pb2.ArtifactRef(
        sha256=a.sha256, name=a.name, media_type=a.media_type, size_bytes=a.size_bytes
    )


def error_detail(e: dict | None) -> common_pb2.ErrorDetail | None:
    if not e:
        return None
    from google.rpc import code_pb2

    return common_pb2.ErrorDetail(
        code=code_pb2.Code.Value(e.get("code", "UNKNOWN")),
        message=e.get("message", ""),
        field_violations=[common_pb2.FieldViolation(**v) for v in e.get("field_violations", [])],
        retryable=e.get("retryable", False),
    )


def job_message(job: Job, artifacts: list[JobArtifact] = ()) -> jobs_pb2.Job:
    return jobs_pb2.Job(
        id=job.id,
        service=job.service,
        kind=job.kind,
        state=STATE_TO_PROTO[job.state],
        progress=common_pb2.Progress(
            fraction=job.progress_fraction,
            stage=job.progress_stage,
            step=job.progress_step,
            total_steps=job.progress_total,
            message=job.progress_message,
        ),
        params=struct(job.params),
        result=struct(job.result),
        artifacts=[artifact_ref(a) for a in artifacts],
        error=error_detail(job.error),
        idempotency_key=job.idempotency_key or "",
        cancel_requested=job.cancel_requested,
        attempts=job.attempts,
        create_time=timestamp(job.created_at),
        update_time=timestamp(job.updated_at),
        start_time=timestamp(job.started_at),
        end_time=timestamp(job.finished_at),
        parent_job_id=job.parent_job_id or "",  # the pipeline job it is a step of
    )


def event_message(ev: JobEvent) -> jobs_pb2.JobEvent:
    payload = ev.payload or {}
    progress = payload.get("progress")
    return jobs_pb2.JobEvent(
        job_id=ev.job_id,
        seq=ev.seq,
        type=EVENT_TYPES[ev.type],
        state=STATE_TO_PROTO[ev.state],
        progress=common_pb2.Progress(**progress) if progress else None,
        message=payload.get("message", "") or (payload.get("error") or {}).get("message", ""),
        artifact=artifact_ref(payload["artifact"]) if payload.get("artifact") else None,
        time=timestamp(ev.created_at),
    )


def request_params(request, exclude: tuple[str, ...] = ("idempotency_key",)) -> dict:
    """A Submit request's fields as plain data (defaults included), for validation."""
    data = json_format.MessageToDict(
        request,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    return {k: v for k, v in data.items() if k not in exclude}
