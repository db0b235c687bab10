"""Where the jobs' volumes come from (an nnU-Net folder, generated phantoms, NIfTI paths, another
job's artifacts), checked for tenant, kind and state. `PAPERWORKS_SEGMENTER_DATA_ROOT`, when
set, is the only folder paths may point into."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from paperworks.services.segmenter import synthetic, volumes
from paperworks.services.segmenter.spec import DatasetParams
from paperworks.services.segmenter.volumes import Volume
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MANIFEST = "denoise_manifest.json"


class SegmenterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAPERWORKS_SEGMENTER_", extra="ignore")
    data_root: Path | None = Field(default=None, description="Dataset and image paths must lie under it.")


def _checked(path: str, field: str) -> Path:
    p = Path(path).expanduser().resolve()
    root = SegmenterSettings().data_root
    if root is not None and not p.is_relative_to(root.resolve()):
        raise InvalidArgument(field, f"must lie under PAPERWORKS_SEGMENTER_DATA_ROOT ({root})")
    return p


def load_cases(
    params: DatasetParams, field: str = "dataset"
) -> tuple[list[tuple[Volume, Volume | None]], dict]:
    if params.synthetic is not None:
        s = params.synthetic
        cfg = synthetic.PhantomConfig(
            size=s.size,
            lesions=s.lesions,
            lesion_radius=s.lesion_radius,
            lesion_contrast=s.lesion_contrast,
            noise=s.noise,
            blur=s.blur,
        )
        cases = []
        for k in range(params.limit or s.count):
            image, labels = synthetic.phantom(cfg, s.seed * 100_003 + k)
            sp, aff = (1.0, 1.0, 1.0), np.eye(4)
            cases.append((Volume(f"case_{k:03d}", image, sp, aff), Volume(f"case_{k:03d}", labels, sp, aff)))
        return cases, dict(synthetic.STRUCTURES)
    return volumes.load_dataset(_checked(params.path, f"{field}.path"), f"{field}.path", limit=params.limit)


def load_images(paths: list[str], field: str = "images") -> list[Volume]:
    out = []
    for k, path in enumerate(paths):
        p = _checked(path, f"{field}[{k}]")
        v = volumes.as_image(volumes.read_file(p, f"{field}[{k}]"), f"{field}[{k}]")
        v.name = p.name.removesuffix(".gz").removesuffix(".nii").removesuffix("_0000")
        out.append(v)
    return out


def job_of(store: JobStore, tenant: str | None, job_id: str, kind: str, field: str, states=("SUCCEEDED",)):
    try:
        job = store.get(tenant, "segmenter", job_id)
    except NotFound:
        raise NotFound(f"no segmenter job {job_id!r}", field) from None
    if job.kind != kind:
        raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not {kind}")
    if job.state not in states:
        raise FailedPrecondition(f"job {job_id} is {job.state}, not SUCCEEDED", field)
    return job


def job_artifact(
    store: JobStore,
    artifacts: ArtifactStore,
    tenant: str | None,
    job_id: str,
    kind: str,
    name: str,
    field: str,
) -> tuple[bytes, str]:
    """(bytes, sha256) of artifact `name` of the tenant's SUCCEEDED segmenter job of `kind`."""
    job_of(store, tenant, job_id, kind, field)
    for artifact in store.artifacts(job_id):
        if artifact.name == name:
            return artifacts.path(artifact.sha256).read_bytes(), artifact.sha256
    raise FailedPrecondition(f"job {job_id} has no artifact {name}", field)


def denoised_volumes(
    store: JobStore, artifacts: ArtifactStore, tenant: str, job_id: str, field: str
) -> list[Volume]:
    """The outputs of a denoise job: SUCCEEDED, or still RUNNING once its manifest (written after
    every volume) is attached, which is when it submits its chained segment job."""
    job = job_of(store, tenant, job_id, "denoise", field, states=("SUCCEEDED", "RUNNING"))
    found = {a.name: a.sha256 for a in store.artifacts(job_id)}
    if MANIFEST not in found:
        raise FailedPrecondition(f"job {job_id} is {job.state} and has not stored its outputs", field)
    import json

    names = json.loads(artifacts.path(found[MANIFEST]).read_bytes())["volumes"]
    out = []
    for name in names:
        raw = artifacts.path(found[f"{name}_denoised.nii.gz"]).read_bytes()
        out.append(volumes.as_image(volumes.read_nifti(raw, field, name), field))
    return out
