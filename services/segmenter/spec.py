"""The segmenter service as the platform sees it: SEMIR graph-minor segmentation and WNE denoising.

Import-light (pydantic only). A 0 or an empty value in a request means the documented default,
as proto3 cannot tell them apart.
"""

from typing import Annotated, Literal

from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, BeforeValidator, Field, model_validator


def _default(value):
    return BeforeValidator(lambda v: value if v in (0, 0.0, "0", "", None) else v)


class SyntheticParams(BaseModel):
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    count: Annotated[int, _default(5), Field(ge=1, le=64)] = 5
    size: Annotated[int, _default(32), Field(ge=16, le=256)] = 32
    lesions: Annotated[int, _default(3), Field(ge=0, le=16)] = 3
    lesion_radius: Annotated[float, _default(2.5), Field(ge=1.0, le=16.0)] = 2.5
    lesion_contrast: Annotated[float, _default(0.12), Field(gt=0.0, le=1.0)] = 0.12
    noise: Annotated[float, _default(0.03), Field(ge=0.0, le=1.0)] = 0.03
    blur: Annotated[float, _default(0.6), Field(ge=0.0, le=4.0)] = 0.6


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
    trials: Annotated[int, _default(40), Field(ge=2, le=2000)] = 40
    optimizer: Annotated[Literal["tpe", "extra_trees"], _default("tpe")] = "tpe"
    max_volumes: Annotated[int, _default(20), Field(ge=1, le=20)] = 20
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class TrainSegmenterParams(BaseModel):
    minor_job_id: JobId
    dataset: DatasetParams
    structures: list[Annotated[int, Field(ge=1, le=255)]] = Field(default_factory=list, max_length=32)
    steps: Annotated[int, _default(200), Field(ge=1, le=100_000)] = 200
    hidden: Annotated[int, _default(32), Field(ge=4, le=512)] = 32
    layers: Annotated[int, _default(3), Field(ge=1, le=12)] = 3
    learning_rate: Annotated[float, _default(1e-2), Field(gt=0.0, le=1.0)] = 1e-2
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class SegmentParams(BaseModel):
    model_job_id: JobId
    dataset: DatasetParams | None = None
    images: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=1000
    )
    source_job_id: OptionalJobId = ""
    threshold: Annotated[float, _default(0.5), Field(gt=0.0, lt=1.0)] = 0.5

    @model_validator(mode="after")
    def one_input(self):
        given = [self.dataset is not None, bool(self.images), bool(self.source_job_id)]
        if sum(given) != 1:
            raise ValueError("set exactly one of dataset, images and source_job_id")
        return self


class TrainDenoiserParams(BaseModel):
    dataset: DatasetParams
    backbone: Annotated[Literal["dncnn", "attention"], _default("dncnn")] = "dncnn"
    wrapper: Annotated[Literal["wne", "input_norm", "none"], _default("wne")] = "wne"
    noise_sigma: Annotated[float, _default(0.1), Field(gt=0.0, le=10.0)] = 0.1
    steps: Annotated[int, _default(300), Field(ge=1, le=100_000)] = 300
    batch_size: Annotated[int, _default(16), Field(ge=1, le=512)] = 16
    learning_rate: Annotated[float, _default(2e-3), Field(gt=0.0, le=1.0)] = 2e-3
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class ThenSegment(BaseModel):
    model_job_id: JobId
    threshold: Annotated[float, _default(0.5), Field(gt=0.0, lt=1.0)] = 0.5


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
