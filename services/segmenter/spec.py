"""The segmenter service as the platform sees it: SEMIR graph-minor segmentation and WNE denoising.

Import-light (pydantic only). A request field whose zero is not its default is `optional` in the
proto: left unset, it is omitted from the parameters and the default below applies; an explicit 0
is validated like any other value.
"""

from typing import Annotated, Literal

from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, model_validator


class SyntheticParams(BaseModel):
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    count: int = Field(default=5, ge=1, le=64)
    size: int = Field(default=32, ge=16, le=256)
    lesions: int = Field(default=3, ge=0, le=16)
    lesion_radius: float = Field(default=2.5, ge=1.0, le=16.0)
    lesion_contrast: float = Field(default=0.12, gt=0.0, le=1.0)
    noise: float = Field(default=0.03, ge=0.0, le=1.0)
    blur: float = Field(default=0.6, ge=0.0, le=4.0)


class DatasetParams(BaseModel):
    path: str = ""
    synthetic: SyntheticParams | None = None
    limit: int = Field(default=0, ge=0, le=10_000)

    @model_validator(mode="after")
    def one_source(self):
        if bool(self.path) == (self.synthetic is not None):
            raise ValueError("set exactly one of dataset.path and dataset.synthetic")
        return self


JobId = Annotated[str, Field(min_length=1, max_length=128)]
OptionalJobId = Annotated[str, Field(default="", max_length=128)]


class FitMinorParamsParams(BaseModel):
    dataset: DatasetParams
    trials: int = Field(default=40, ge=2, le=2000)
    optimizer: Literal["tpe", "extra_trees"] = "tpe"
    max_volumes: int = Field(default=20, ge=1, le=20)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class TrainSegmenterParams(BaseModel):
    minor_job_id: JobId
    dataset: DatasetParams
    structures: list[Annotated[int, Field(ge=1, le=255)]] = Field(default_factory=list, max_length=32)
    steps: int = Field(default=200, ge=1, le=100_000)
    hidden: int = Field(default=32, ge=4, le=512)
    layers: int = Field(default=3, ge=1, le=12)
    learning_rate: float = Field(default=1e-2, gt=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class SegmentParams(BaseModel):
    model_job_id: JobId
    dataset: DatasetParams | None = None
    images: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=1000
    )
    source_job_id: OptionalJobId = ""
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0)

    @model_validator(mode="after")
    def one_input(self):
        given = [self.dataset is not None, bool(self.images), bool(self.source_job_id)]
        if sum(given) != 1:
            raise ValueError("set exactly one of dataset, images and source_job_id")
        return self


class TrainDenoiserParams(BaseModel):
    dataset: DatasetParams
    backbone: Literal["dncnn", "attention"] = "dncnn"
    wrapper: Literal["wne", "input_norm", "none"] = "wne"
    noise_sigma: float = Field(default=0.1, gt=0.0, le=10.0)
    steps: int = Field(default=300, ge=1, le=100_000)
    batch_size: int = Field(default=16, ge=1, le=512)
    learning_rate: float = Field(default=2e-3, gt=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class ThenSegment(BaseModel):
    model_job_id: JobId
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0)


class DenoiseParams(BaseModel):
    model_job_id: JobId
    dataset: DatasetParams | None = None
    images: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=1000
    )
    then_segment: ThenSegment | None = None

    @model_validator(mode="after")
    def one_input(self):
        if (self.dataset is not None) == bool(self.images):
            raise ValueError("set exactly one of dataset and images")
        return self


def _kind(name, params, rpc, description):
    return JobKind(
        name=name,
        params=params,
        handler=f"paperworks.services.segmenter.tasks:run_{name}",
        submit_rpc=rpc,
        description=description,
    )


SPEC = ServiceSpec(
    name="segmenter",
    description="SEMIR graph-minor segmentation of small structures (arXiv 2605.12389) and WNE "
    "normalization-equivariant denoising (ICML 2026).",
    servicer="paperworks.services.segmenter.servicer:SegmenterServicer",
    grpc_module="paperworks.segmenter.v1.segmenter_pb2_grpc",
    grpc_service="SegmenterService",
    port=50056,
    kinds={
        "fit_minor_params": _kind(
            "fit_minor_params",
            FitMinorParamsParams,
            "SubmitFitMinorParams",
            "few-shot volumes + labels -> the six minor parameters (boundary Dice)",
        ),
        "train_segmenter": _kind(
            "train_segmenter",
            TrainSegmenterParams,
            "SubmitTrainSegmenter",
            "minor parameters + volumes -> one GINE node classifier per structure",
        ),
        "segment": _kind(
            "segment",
            SegmentParams,
            "SubmitSegment",
            "volumes -> label volumes (NIfTI) + per-structure statistics",
        ),
        "train_denoiser": _kind(
            "train_denoiser",
            TrainDenoiserParams,
            "SubmitTrainDenoiser",
            "images -> WNE-wrapped denoiser, PSNR and NE defect",
        ),
        "denoise": _kind(
            "denoise",
            DenoiseParams,
            "SubmitDenoise",
            "volumes -> denoised volumes (NIfTI); optionally chains a segment job",
        ),
    },
)
