"""Where a job's inputs come from: a `scenes.json` dataset or the synthetic scenes, and a train
job's checkpoint, checked for tenant, kind and state.

`PAPERWORKS_SCENEGRAPH_DATA_ROOT`, when set, is the only folder dataset paths may point into.
"""
from __future__ import annotations

from pathlib import Path

from paperworks.services.scenegraph.dataset import load_json
from paperworks.services.scenegraph.sample import Sample
from paperworks.services.scenegraph.scenes import SceneConfig, generate_scenes
from paperworks.services.scenegraph.spec import DatasetParams
from paperworks.services.scenegraph.vocab import Vocabulary, synthetic_vocabulary
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MODEL_FILE = "model.safetensors"


class ScenegraphSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAPERWORKS_SCENEGRAPH_", extra="ignore")
    data_root: Path | None = Field(default=None, description="Dataset paths must lie under it.")


def load_dataset(params: DatasetParams, image_size: int) -> tuple[Vocabulary, list[Sample]]:
    if params.synthetic is not None:
        cfg = SceneConfig(image_size=image_size, overlap_pair_rate=params.synthetic.overlap_pair_rate)
        return synthetic_vocabulary(), generate_scenes(params.synthetic.images, params.synthetic.seed, cfg)
    path = Path(params.path).expanduser().resolve()
    root = ScenegraphSettings().data_root
    if root is not None and not path.is_relative_to(root.resolve()):
        raise InvalidArgument("dataset.path", f"must lie under PAPERWORKS_SCENEGRAPH_DATA_ROOT ({root})")
    return load_json(path, image_size)


def check_vocabulary(model: Vocabulary, data: Vocabulary) -> None:
    """A dataset evaluated or predicted with a model must use the model's classes and predicates."""
    if data.classes != model.classes or data.predicates != model.predicates:
        raise InvalidArgument("dataset", "its classes and predicates differ from the trained model's")


def model_artifact(store: JobStore, artifacts: ArtifactStore, tenant: str | None, job_id: str,
                   field: str = "train_job_id") -> tuple[bytes, str]:
    """(bytes, sha256) of the checkpoint of the tenant's SUCCEEDED scenegraph train job."""
    try:
        job = store.get(tenant, "scenegraph", job_id)
    except NotFound:
        raise NotFound(f"no scenegraph job {job_id!r}", field) from None
    if job.kind != "train":
        raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not train")
    if job.state != "SUCCEEDED":
        raise FailedPrecondition(f"job {job_id} is {job.state}, not SUCCEEDED", field)
    for artifact in store.artifacts(job_id):
        if artifact.name == MODEL_FILE:
            return artifacts.path(artifact.sha256).read_bytes(), artifact.sha256
    raise FailedPrecondition(f"job {job_id} has no artifact {MODEL_FILE}", field)
