"""A model another service's job announced (MODEL_READY), loaded without importing that service.

Services chain through these events (the router runs its local model from a quantizer job). A
consumer names the producing service and job. The job's own MODEL_READY event says which
artifact is the model, and the producer's `ServiceSpec.model_loader` turns that artifact into a
backend. So the consumer never imports the producer's code, and each service's folder stays
self-contained; only a SUCCEEDED job of the same tenant is ever loaded.
"""

from __future__ import annotations

from paperworks.shared import registry
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.backends.base import ModelBackend
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.errors import FailedPrecondition, InvalidArgument
from paperworks.shared.inputs import InputScope
from paperworks.shared.job_refs import finished_job


def announced_model(store: JobStore, tenant: str | None, service: str, job_id: str, field: str):
    """(job, artifact) of the model the tenant's SUCCEEDED `service` job announced last."""
    if not job_id:
        raise InvalidArgument(field, f"name the {service} job whose model to use")
    job = finished_job(store, tenant, service, job_id, field)
    models = store.announced_models(job_id)
    if not models:
        raise FailedPrecondition(f"{service} job {job_id} ({job.kind}) announced no model", field)
    return job, models[-1]


def load_announced(store: JobStore, artifacts: ArtifactStore, tenant: str | None, service: str,
                   job_id: str, field: str) -> tuple[dict, ModelBackend]:
    """(artifact, backend) of the model the job announced, the backend built by its service's
    `model_loader`."""
    spec = registry.services().get(service)
    if spec is None or spec.model_loader is None:
        raise FailedPrecondition(f"service {service!r} announces no models that load as language models",
                                 field)
    job, artifact = announced_model(store, tenant, service, job_id, field)
    # the loader reads the producing job's own inputs (its base model's upload) as that job's tenant
    scope = InputScope(store, artifacts, job.tenant)
    return artifact, registry.load(spec.model_loader)(job, artifact, scope, field)
