"""The urban service as the platform sees it: UrbanFusion pretraining, downstream tasks, evaluation.

Import-light (pydantic only): the CLI, the stack and the dispatcher read it. A 0 or an
empty value in a request means the documented default, as proto3 cannot tell them apart.
"""
from typing import Annotated, Literal

from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, BeforeValidator, Field, model_validator


def _default(value):
    return BeforeValidator(lambda v: value if v in (0, 0.0, "0", "", None) else v)


class SyntheticWorldParams(BaseModel):
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    cities: Annotated[int, _default(6), Field(ge=1, le=64)] = 6
    locations_per_city: Annotated[int, _default(600), Field(ge=20, le=20_000)] = 600
    missing_rate: float = Field(default=0.0, ge=0.0, le=0.9)


class DatasetParams(BaseModel):
    path: str = ""
    synthetic: SyntheticWorldParams | None = None

    @model_validator(mode="after")
    def one_source(self):
        if bool(self.path) == (self.synthetic is not None):
            raise ValueError("set exactly one of dataset.path and dataset.synthetic")
        return self


Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_\-]+$")]


class PretrainParams(BaseModel):
    dataset: DatasetParams
    modalities: list[Name] = Field(default_factory=list, max_length=32)
    exclude_regions: list[str] = Field(default_factory=list, max_length=1000)
    extractors: dict[Name, str] = Field(default_factory=dict)
    embed_dim: Annotated[int, _default(64), Field(ge=16, le=512)] = 64
    layers: Annotated[int, _default(2), Field(ge=1, le=8)] = 2
    heads: Annotated[int, _default(4), Field(ge=1, le=16)] = 4
    reconstruction_weight: float = Field(default=0.0625, ge=0.0, le=1.0)
    view_overlap: float = Field(default=0.0, ge=0.0, le=1.0)
    steps: Annotated[int, _default(400), Field(ge=1, le=100_000)] = 400
    batch_size: Annotated[int, _default(256), Field(ge=8, le=4096)] = 256
    learning_rate: Annotated[float, _default(2e-3), Field(gt=0.0, le=1.0)] = 2e-3
    seed: int = Field(default=0, ge=0, le=2**63 - 1)

    @model_validator(mode="after")
    def heads_divide_width(self):
        if self.embed_dim % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide embed_dim ({self.embed_dim})")
        return self


TaskTypeName = Literal["regression", "classification"]
ProbeName = Annotated[Literal["linear", "mlp"], _default("linear")]
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
    test_fraction: Annotated[float, _default(0.3), Field(ge=0.05, le=0.5)] = 0.3
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
    test_fraction: Annotated[float, _default(0.3), Field(ge=0.05, le=0.5)] = 0.3
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


SPEC = ServiceSpec(
    name="urban",
    description="UrbanFusion (arXiv 2510.13774): location embeddings by stochastic multimodal fusion.",
    servicer="paperworks.services.urban.servicer:UrbanServicer",
    grpc_module="paperworks.urban.v1.urban_pb2_grpc",
    grpc_service="UrbanService",
    kinds={
        "pretrain": JobKind(
            name="pretrain", params=PretrainParams, handler="paperworks.services.urban.tasks:run_pretrain",
            submit_rpc="SubmitPretrain",
            description="dataset of locations x modalities -> encoder, embeddings.parquet, embedding map",
        ),
        "fit_task": JobKind(
            name="fit_task", params=FitTaskParams, handler="paperworks.services.urban.tasks:run_fit_task",
            submit_rpc="SubmitFitTask",
            description="pretrained encoder + target -> probe, test score with/without coordinates",
        ),
        "evaluate": JobKind(
            name="evaluate", params=EvaluateParams, handler="paperworks.services.urban.tasks:run_evaluate",
            submit_rpc="SubmitEvaluate",
            description="R2/F1 per task, per modality subset, leave-one-region-out, vs concatenation",
        ),
    },
)
