"""The urban service as the platform sees it: UrbanFusion pretraining, downstream tasks, evaluation.

Import-light (pydantic, the error types): the CLI, the stack and the dispatcher read it. A request field whose
zero is not its default is `optional` in the proto; left unset, it is absent here and the default
below applies (an explicit 0 is validated like any other value).
"""
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Literal

from paperworks.services.urban.urbanfusion.errors import FieldError
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import InputRefParams, path_shorthand
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, model_validator


@contextmanager
def invalid_arguments() -> Iterator[None]:
    """The method code's FieldError (an input it cannot use) as INVALID_ARGUMENT on that field: the
    job handlers and the gRPC edge run the method inside this."""
    try:
        yield
    except FieldError as exc:
        raise InvalidArgument(exc.field, exc.message) from None


class SyntheticWorldParams(BaseModel):
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    cities: int = Field(default=6, ge=1, le=64)
    locations_per_city: int = Field(default=600, ge=20, le=20_000)
    missing_rate: float = Field(default=0.0, ge=0.0, le=0.9)


class DatasetParams(BaseModel):
    """A dataset folder (`source`: an upload of it as an archive, a job's artifact, an s3://
    archive or a server path; `path` is short for `source.path`) or the synthetic world."""

    path: str = ""
    source: InputRefParams | None = None
    synthetic: SyntheticWorldParams | None = None

    @model_validator(mode="before")
    @classmethod
    def _path_is_source_path(cls, data):
        return path_shorthand(data)

    @model_validator(mode="after")
    def one_source(self):
        if (self.source is None) == (self.synthetic is None):
            raise ValueError("set exactly one of dataset.source (or dataset.path) and dataset.synthetic")
        if self.source is not None and self.source.path and not self.path:
            self.path = self.source.path
        return self


Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_\-]+$")]


class PretrainParams(BaseModel):
    dataset: DatasetParams
    modalities: list[Name] = Field(default_factory=list, max_length=32)
    exclude_regions: list[str] = Field(default_factory=list, max_length=1000)
    extractors: dict[Name, str] = Field(default_factory=dict)
    embed_dim: int = Field(default=64, ge=16, le=512)
    layers: int = Field(default=2, ge=1, le=8)
    heads: int = Field(default=4, ge=1, le=16)
    reconstruction_weight: float = Field(default=0.0625, ge=0.0, le=1.0)
    view_overlap: float = Field(default=0.0, ge=0.0, le=1.0)
    steps: int = Field(default=400, ge=1, le=100_000)
    batch_size: int = Field(default=256, ge=8, le=4096)
    learning_rate: float = Field(default=2e-3, gt=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)

    @model_validator(mode="after")
    def heads_divide_width(self):
        if self.embed_dim % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide embed_dim ({self.embed_dim})")
        return self


TaskTypeName = Literal["regression", "classification"]
ProbeName = Literal["linear", "mlp"]
JobId = Annotated[str, Field(min_length=1, max_length=128)]


class FitTaskParams(BaseModel):
    pretrain_job_id: JobId
    dataset: DatasetParams
    target: Name
    task_type: TaskTypeName
    probe: ProbeName = "linear"
    append_coordinates: bool = False
    modalities: list[Name] = Field(default_factory=list, max_length=33)
    holdout_region: str = ""
    test_fraction: float = Field(default=0.3, ge=0.05, le=0.5)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class TaskSpecParams(BaseModel):
    target: Name
    task_type: Literal["", "regression", "classification"] = ""


class SubsetParams(BaseModel):
    modalities: list[Name] = Field(min_length=1, max_length=33)


class EvaluateParams(BaseModel):
    pretrain_job_id: JobId
    dataset: DatasetParams
    tasks: list[TaskSpecParams] = Field(default_factory=list, max_length=64)
    probe: ProbeName = "linear"
    subsets: list[SubsetParams] = Field(default_factory=list, max_length=64)
    leave_one_region_out: bool = False
    test_fraction: float = Field(default=0.3, ge=0.05, le=0.5)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


SPEC = ServiceSpec(
    name="urban",
    description="UrbanFusion (arXiv 2510.13774): location embeddings by stochastic multimodal fusion.",
    servicer="paperworks.services.urban.servicer:UrbanServicer",
    grpc_module="paperworks.urban.v1.urban_pb2_grpc",
    grpc_service="UrbanService",
    port=50057,
    kinds={
        "pretrain": JobKind(
            name="pretrain", params=PretrainParams, handler="paperworks.services.urban.tasks:run_pretrain",
            submit_rpc="SubmitPretrain",
            description="dataset of locations x modalities -> encoder, embeddings.parquet, embedding map",
            result={"locations": "locations pretrained on (count)",
                    "regions": "the regions (cities) they lie in (names)",
                    "modalities": "the encoder's modalities, coordinates first (names)",
                    "embed_dim": "embedding width D (count)", "steps": "optimizer steps run (count)",
                    "loss": "(1 - lambda) contrastive + lambda reconstruction, mean of the last 10% "
                            "of steps (nats + squared z-score units)",
                    "contrastive": "symmetric InfoNCE between the two views, same steps (nats; "
                                   "ln(batch) is chance)",
                    "reconstruction": "squared L2 error of a present modality's z-scored features, "
                                      "same steps (squared z-score units, summed over its features)",
                    "first_loss": "the loss at step 1 (same units as loss)"},
        ),
        "fit_task": JobKind(
            name="fit_task", params=FitTaskParams, handler="paperworks.services.urban.tasks:run_fit_task",
            submit_rpc="SubmitFitTask",
            description="pretrained encoder + target -> probe, test score with/without coordinates",
            result={"target": "the target column", "task_type": "regression or classification",
                    "metric": "r2 (regression) or macro_f1 (classification)", "probe": "linear or mlp",
                    "test": "the metric on the test locations, with_coordinates (raw lat/lon appended "
                            "to the embedding) and without_coordinates (r2: 1 is perfect, 0 is the "
                            "mean; macro_f1: 0..1)",
                    "served": "the variant Predict uses",
                    "train_locations": "labeled locations fitted (count)",
                    "test_locations": "labeled locations scored (count)",
                    "classes": "class labels in probability order (classification; else empty)"},
        ),
        "evaluate": JobKind(
            name="evaluate", params=EvaluateParams, handler="paperworks.services.urban.tasks:run_evaluate",
            submit_rpc="SubmitEvaluate",
            description="R2/F1 per task, per modality subset, leave-one-region-out, vs concatenation",
            result={"probe": "linear or mlp",
                    "tasks": "per target: metric (r2 or macro_f1) of embedding, embedding+coordinates, "
                             "concatenated and concatenated+coordinates (the baseline with the raw "
                             "lat/lon the embedding also sees) on a random test split; coordinates "
                             "(the coordinates-only embedding); held_out_region_mean (each region "
                             "scored by a probe fitted on the others, averaged); every score in "
                             "evaluation.json"},
        ),
    },
)
