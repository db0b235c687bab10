"""The scenegraph service as the platform sees it: DS-Net training, evaluation, prediction.

Import-light (pydantic only): the CLI, the stack and the dispatcher read it. A field the request
leaves unset (the proto declares it `optional`) takes the default here; an explicit 0 or "" is
validated like any other value.
"""
from typing import Annotated, Literal

from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, model_validator


class SyntheticScenesParams(BaseModel):
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    images: int = Field(default=400, ge=1, le=20_000)
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
    streams: Literal["dual", "single", "vision"] = "dual"
    fusion: Literal["bidirectional", "space_to_vision", "vision_to_space", "none"] = "bidirectional"
    gated: bool = True


JobId = Annotated[str, Field(min_length=1, max_length=128)]
Mode = Literal["predcls", "sgcls", "sgdet"]


class TrainParams(BaseModel):
    dataset: DatasetParams
    base: Literal["motifs", "penet"] = "motifs"
    head: Literal["original", "dsnet"] = "dsnet"
    dsnet: DSNetOptions = Field(default_factory=DSNetOptions)
    image_size: int = Field(default=64, ge=48, le=256)
    detector_epochs: int = Field(default=15, ge=1, le=500)
    relation_epochs: int = Field(default=15, ge=1, le=500)
    max_objects: int = Field(default=8, ge=2, le=32)
    depth_order: bool = False
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class EvaluateParams(BaseModel):
    train_job_id: JobId
    dataset: DatasetParams
    modes: list[Mode] = Field(default_factory=list, max_length=3)


class PredictParams(BaseModel):
    train_job_id: JobId
    dataset: DatasetParams
    top_k: int = Field(default=20, ge=1, le=1000)
    max_drawings: int = Field(default=20, ge=0, le=1000)


SPEC = ServiceSpec(
    name="scenegraph",
    description="DS-Net (ICML 2026): dual-stream predicate heads for scene graph generation.",
    servicer="paperworks.services.scenegraph.servicer:ScenegraphServicer",
    grpc_module="paperworks.scenegraph.v1.scenegraph_pb2_grpc",
    grpc_service="ScenegraphService",
    port=50055,
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
