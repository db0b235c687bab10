"""Where a job's inputs come from: a dataset folder or the synthetic world, and another job's
artifacts (a pretrained encoder, a fitted probe), checked for tenant, kind and state.

`PAPERWORKS_URBAN_DATA_ROOT`, when set, is the only folder dataset paths may point into.
"""
from __future__ import annotations

from pathlib import Path

from paperworks.services.urban import world
from paperworks.services.urban.dataset import Dataset, load_folder
from paperworks.services.urban.spec import DatasetParams
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class UrbanSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAPERWORKS_URBAN_", extra="ignore")
    data_root: Path | None = Field(default=None, description="Dataset paths must lie under it.")


def load_dataset(params: DatasetParams) -> Dataset:
    if params.synthetic is not None:
        s = params.synthetic
        return world.generate(world.WorldConfig(seed=s.seed, cities=s.cities,
                                                locations_per_city=s.locations_per_city,
                                                missing_rate=s.missing_rate))
    path = Path(params.path).expanduser().resolve()
    root = UrbanSettings().data_root
    if root is not None and not path.is_relative_to(root.resolve()):
        raise InvalidArgument("dataset.path", f"must lie under PAPERWORKS_URBAN_DATA_ROOT ({root})")
    return load_folder(path)


def job_artifact(store: JobStore, artifacts: ArtifactStore, tenant: str | None, job_id: str, kind: str,
                 name: str, field: str) -> tuple[bytes, str]:
    """(bytes, sha256) of artifact `name` of the tenant's SUCCEEDED urban job of `kind`."""
    try:
        job = store.get(tenant, "urban", job_id)
    except NotFound:
        raise NotFound(f"no urban job {job_id!r}", field) from None
    if job.kind != kind:
        raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not {kind}")
    if job.state != "SUCCEEDED":
        raise FailedPrecondition(f"job {job_id} is {job.state}, not SUCCEEDED", field)
    for artifact in store.artifacts(job_id):
        if artifact.name == name:
            return artifacts.path(artifact.sha256).read_bytes(), artifact.sha256
    raise FailedPrecondition(f"job {job_id} has no artifact {name}", field)
