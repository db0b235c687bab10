"""Inputs of the pipeline service: the outputs of earlier steps, handed to later ones.

A run job reads no dataset or model itself: its parameters are the steps. What it hands over is an
earlier step's artifact to a later step: within one service as a job-artifact input reference; to
another service (which reads only its own jobs' artifacts) as the tenant's own upload of the same
bytes, recorded and pinned here: the artifact store is content-addressed, so nothing is copied, and
the upload belongs to the tenant whose job produced the artifact.
"""
from __future__ import annotations

from paperworks.shared.config import get_settings
from paperworks.shared.db.uploads import UploadStore


def artifact_input(store, tenant: str, producer_service: str, consumer_service: str, job_id: str,
                   artifact) -> dict:
    """The input reference (`paperworks.v1.InputRef` as parameters) a `consumer_service` step gives
    for `artifact` (an ArtifactRef) of the tenant's `producer_service` job `job_id`."""
    if producer_service == consumer_service:
        return {"artifact": {"job_id": job_id, "name": artifact.name}}
    uploads = UploadStore(store.db)
    uploads.record(tenant, artifact.sha256, artifact.name, artifact.media_type or "application/octet-stream",
                   artifact.size_bytes, get_settings().upload_ttl_s)
    uploads.pin(tenant, artifact.sha256)  # a job uses it: it never expires
    return {"upload": artifact.sha256}
