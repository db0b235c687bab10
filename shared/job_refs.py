"""A tenant's earlier job, named in a request: found, checked for kind and state, its artifact read.

Jobs build on jobs (a segment job on a train job's model, a probe on a pretrained encoder, Route
on a trained policy, the router on a quantizer job's model). Every such reference is checked the
same way: the job must be the caller's tenant's, of the expected kind, and finished; refusals name
the request field that held the job id.
"""
from __future__ import annotations

from collections.abc import Iterable

from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, NotFound


def finished_job(store: JobStore, tenant: str | None, service: str, job_id: str, field: str,
                 kind: str | None = None, states: Iterable[str] = ("SUCCEEDED",)):
    """The tenant's `service` job `job_id`, of `kind` when given, in one of `states`."""
    if not job_id:
        raise InvalidArgument(field, f"name the {service} {kind or ''} job to use".replace("  ", " "))
    try:
        job = store.get(tenant, service, job_id)
    except NotFound:
        raise NotFound(f"no {service} job {job_id!r}", field) from None
    if kind is not None and job.kind != kind:
        raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not {kind}")
    if job.state not in tuple(states):
        raise FailedPrecondition(f"{service} job {job_id} is {job.state}, not SUCCEEDED", field)
    return job


def artifact_sha(store: JobStore, job_id: str, name: str, field: str) -> str:
    """sha256 of the job's last artifact called `name`."""
    found = [a.sha256 for a in store.artifacts(job_id) if a.name == name]
    if not found:
        raise FailedPrecondition(f"job {job_id} has no artifact {name}", field)
    return found[-1]


def job_artifact(store: JobStore, artifacts: ArtifactStore, tenant: str | None, service: str,
                 job_id: str, name: str, field: str, kind: str | None = None) -> tuple[bytes, str]:
    """(bytes, sha256) of artifact `name` of the tenant's SUCCEEDED `service` job."""
    finished_job(store, tenant, service, job_id, field, kind)
    sha = artifact_sha(store, job_id, name, field)
    return artifacts.path(sha).read_bytes(), sha
