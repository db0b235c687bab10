"""The scenegraph service as the platform sees it: DS-Net training, evaluation, prediction.

Import-light (pydantic only): the CLI, the stack and the dispatcher read it. A field the request
leaves unset (the proto declares it `optional`) takes the default here; an explicit 0 or "" is
validated like any other value.
"""
from typing import Annotated, Literal

from paperworks.shared.inputs import InputRefParams, path_shorthand
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, model_validator


class SyntheticScenesParams(BaseModel):
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    images: int = Field(default=400, ge=1, le=20_000)
    overlap_pair_rate: float = Field(default=0.0, ge=0, le=1)


class DatasetParams(BaseModel):
    """A scenes.json dataset (`source`: its folder uploaded as an archive, a job's artifact, an
    s3:// archive or a server path, a scenes.json or a folder holding one; `path` is short for
    `source.path`) or the synthetic scenes."""

    path: str = ""
    source: InputRefParams | None = None
    synthetic: SyntheticScenesParams | None = None

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
            result={"images": "training images (count)",
                    "relations": "annotated (subject, predicate, object) triplets in them (count)",
                    "base": "the base model: motifs or penet",
                    "head": "the predicate head: dsnet or original",
                    "detector_loss": "the detector's CenterNet loss in its last epoch: focal heatmap "
                                     "loss + 0.1 x box-size L1 + centre-offset L1, per object (sizes "
                                     "and offsets in stride-4 cells), mean over the epoch's batches",
                    "relation_loss": "relation model loss of the last epoch: cross-entropy over all "
                                     "ordered object pairs, background included (nats), plus the DS-Net "
                                     "streams' auxiliary terms or PE-Net's prototype regularizer",
                    "first_relation_loss": "the same loss in the first epoch (it should fall)"},
        ),
        "evaluate": JobKind(
            name="evaluate", params=EvaluateParams,
            handler="paperworks.services.scenegraph.tasks:run_evaluate",
            submit_rpc="SubmitEvaluate",
            description="R@K, ngR@K, mR@K in PredCls/SGCls/SGDet, per predicate and per group",
            result={"images": "images evaluated (count)",
                    "modes": "per mode (predcls / sgcls / sgdet): R@K (recall of annotated triplets "
                             "in the top K, one predicate per pair), ngR@K (no graph constraint), mR@K "
                             "(R@K averaged over predicates) for K = 20, 50, 100 (fractions 0..1)",
                    "mR@100_non_geometric": "per mode: mR@100 over the non-geometric predicates only "
                                            "(fraction 0..1); every predicate and group in "
                                            "evaluation.json"},
        ),
        "predict": JobKind(
            name="predict", params=PredictParams, handler="paperworks.services.scenegraph.tasks:run_predict",
            submit_rpc="SubmitPredict",
            description="a batch of images -> scene graphs JSON and drawn PNGs",
            result={"images": "images given scene graphs (count)",
                    "triplets": "ranked triplets written to scene_graphs.json, at most top_k per "
                                "image (count)",
                    "drawn": "images drawn as <image id>.png (count, at most max_drawings)"},
        ),
    },
)
