"""The scenegraph service as the platform sees it: DS-Net training, evaluation, prediction.

Import-light (pydantic only): the CLI, the stack and the dispatcher read it. A 0 or an
empty value in a request means the documented default, as proto3 cannot tell them apart.
"""
from typing import Annotated, Literal

from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, BeforeValidator, Field, model_validator


def _default(value):
    return BeforeValidator(lambda v: value if v in (0, 0.0, "0", "", None) else v)


class SyntheticScenesParams(BaseModel):
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    images: Annotated[int, _default(400), Field(ge=1, le=20_000)] = 400
    overlap_pair_rate: float = Field(default=0.0, ge=0, le=1)


class DatasetParams(BaseModel):
    path: str = ""
    synthetic: SyntheticScenesParams | None = None

    @model_validator(mode="after")
    def one_source(self):
        if bool(self.path) == (self.synthetic is not None):
            raise ValueError("set exactly one of dataset.path and dataset.synthetic")
        return self


class DSNetOptions(BaseModel):
    streams: Annotated[Literal["dual", "single", "vision"], _default("dual")] = "dual"
    fusion: Annotated[Literal["bidirectional", "space_to_vision", "vision_to_space", "none"],
                      _default("bidirectional")] = "bidirectional"
    gated: Annotated[bool, BeforeValidator(lambda v: True if v is None else v)] = True


JobId = Annotated[str, Field(min_length=1, max_length=128)]
Mode = Literal["predcls", "sgcls", "sgdet"]


class TrainParams(BaseModel):
    dataset: DatasetParams
    base: Annotated[Literal["motifs", "penet"], _default("motifs")] = "motifs"
    head: Annotated[Literal["original", "dsnet"], _default("dsnet")] = "dsnet"
    dsnet: Annotated[DSNetOptions, BeforeValidator(lambda v: DSNetOptions() if v is None else v)] = Field(
        default_factory=DSNetOptions)
    image_size: Annotated[int, _default(64), Field(ge=48, le=256)] = 64
    detector_epochs: Annotated[int, _default(15), Field(ge=1, le=500)] = 15
    relation_epochs: Annotated[int, _default(15), Field(ge=1, le=500)] = 15
    max_objects: Annotated[int, _default(8), Field(ge=2, le=32)] = 8
    depth_order: bool = False
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class EvaluateParams(BaseModel):
    train_job_id: JobId
    dataset: DatasetParams
    modes: list[Mode] = Field(default_factory=list, max_length=3)


class PredictParams(BaseModel):
    train_job_id: JobId
    dataset: DatasetParams
    top_k: Annotated[int, _default(20), Field(ge=1, le=1000)] = 20
    max_drawings: Annotated[int, BeforeValidator(lambda v: 20 if v is None else v), Field(ge=0, le=1000)] = 20


SPEC = ServiceSpec(
    name="scenegraph",
    description="DS-Net (ICML 2026): dual-stream predicate heads for scene graph generation.",
    servicer="paperworks.services.scenegraph.servicer:ScenegraphServicer",
    grpc_module="paperworks.scenegraph.v1.scenegraph_pb2_grpc",
    grpc_service="ScenegraphService",
    kinds={
        "train": JobKind(
            name="train", params=TrainParams, handler="paperworks.services.scenegraph.tasks:run_train",
            submit_rpc="SubmitTrain",
            description="images + boxes + triplets -> detector, relation model "
                        "(MOTIFS/PE-Net, original/DS-Net head)",
        ),
        "evaluate": JobKind(
            name="evaluate", params=EvaluateParams,
            handler="paperworks.services.scenegraph.tasks:run_evaluate",
            submit_rpc="SubmitEvaluate",
            description="R@K, ngR@K, mR@K in PredCls/SGCls/SGDet, per predicate and per group",
        ),
        "predict": JobKind(
            name="predict", params=PredictParams, handler="paperworks.services.scenegraph.tasks:run_predict",
            submit_rpc="SubmitPredict",
            description="a batch of images -> scene graphs JSON and drawn PNGs",
        ),
    },
)
