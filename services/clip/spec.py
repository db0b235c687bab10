"""The clip service as the platform sees it: the tiny CLIP, RITA's robustness evaluation and
online classification, VACSR's similarity adapters.

Import-light (pydantic only). A request field whose zero is not its default is `optional` in the
proto: left unset, it is omitted and the default below applies (an explicit 0 is validated).
"""

from typing import Annotated, Literal

from paperworks.shared.inputs import InputRefParams
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, field_validator, model_validator

Seed = Annotated[int, Field(default=0, ge=0, le=2**63 - 1)]
JobId = Annotated[str, Field(min_length=1, max_length=128)]
Name = Annotated[str, Field(min_length=1, max_length=64)]
Descriptor = Annotated[str, Field(max_length=64)]
METHODS = ("zero_shot", "ensemble", "tpt", "rtpt", "tda", "rita", "rita_no_cache")
Method = Literal["zero_shot", "ensemble", "tpt", "rtpt", "tda", "rita", "rita_no_cache"]
Adapter = Literal["vacsr", "infonce", "sigmoid", "pcme", "zero_shot"]
MAX_CLASSES, MAX_DESCRIPTORS = 64, 8


class TrainCLIPParams(BaseModel):
    steps: int = Field(default=600, ge=1, le=100_000)
    batch_size: int = Field(default=128, ge=2, le=1024)
    learning_rate: float = Field(default=3e-3, gt=0.0, le=1.0)
    width: int = Field(default=48, ge=16, le=256)
    vision_layers: int = Field(default=2, ge=1, le=8)
    text_layers: int = Field(default=1, ge=1, le=8)
    patch_size: Literal[2, 4, 8, 16] = 8
    seed: Seed = 0

    @model_validator(mode="after")
    def heads_divide(self):
        if self.width % 4:
            raise ValueError(f"width ({self.width}) must be a multiple of 4 (4 attention heads)")
        return self


class ModelSourceParams(BaseModel):
    model_job_id: str = Field(default="", max_length=128)
    checkpoint: InputRefParams | None = None

    @model_validator(mode="after")
    def one_source(self):
        if bool(self.model_job_id) == (self.checkpoint is not None):
            raise ValueError("set exactly one of model_job_id (a train_clip job) and checkpoint")
        return self


class WorldImagesParams(BaseModel):
    seed: Seed = 0
    n: int = Field(default=200, ge=1, le=5000)


class TestImagesParams(BaseModel):
    world: WorldImagesParams | None = None
    images: InputRefParams | None = None
    classes: list[Name] = Field(default=[], max_length=MAX_CLASSES)
    descriptors: list[Descriptor] = Field(default=[], max_length=MAX_DESCRIPTORS)

    @model_validator(mode="after")
    def one_source(self):
        if (self.world is None) == (self.images is None):
            raise ValueError("set exactly one of world and images")
        if self.images is not None and len(self.classes) < 2:
            raise ValueError("classes: an uploaded image set needs at least 2 class names")
        if len(set(self.classes)) != len(self.classes):
            raise ValueError("classes: each name at most once")
        return self


class EvaluateRobustnessParams(BaseModel):
    model: ModelSourceParams
    test: TestImagesParams = Field(default_factory=lambda: TestImagesParams(world=WorldImagesParams()))
    eps_255: list[Annotated[float, Field(ge=0.0, le=32.0)]] = Field(default=[0.0, 1.0, 4.0], max_length=8)
    methods: list[Method] = Field(default=list(METHODS), max_length=len(METHODS))
    views: int = Field(default=64, ge=2, le=256)
    alpha: float = Field(default=0.1, ge=0.0, le=10.0)
    sinkhorn_epsilon: float = Field(default=0.05, gt=0.0, le=1.0)
    gamma: float = Field(default=0.8, gt=0.0, le=10.0)
    capacity: int = Field(default=8, ge=1, le=256)
    tta_loss: Literal["tpt", "ot", "none"] = "tpt"
    seed: Seed = 0

    @field_validator("eps_255", mode="before")
    @classmethod
    def _eps_default(cls, value):
        return value or [0.0, 1.0, 4.0]

    @field_validator("methods", mode="before")
    @classmethod
    def _methods_default(cls, value):
        return value or list(METHODS)

    @model_validator(mode="after")
    def distinct(self):
        if len(set(self.methods)) != len(self.methods):
            raise ValueError("methods: each method at most once")
        if len(set(self.eps_255)) != len(self.eps_255):
            raise ValueError("eps_255: each budget at most once")
        return self


class TrainAdapterParams(BaseModel):
    model: ModelSourceParams
    adapter: Adapter = "vacsr"
    train_items: int = Field(default=2000, ge=8, le=50_000)
    val_items: int = Field(default=500, ge=8, le=10_000)
    noise: float = Field(default=0.0, ge=0.0, le=0.9)
    epochs: int = Field(default=40, ge=1, le=1000)
    batch_size: int = Field(default=64, ge=2, le=4096)
    learning_rate: float = Field(default=1e-3, gt=0.0, le=1.0)
    seed: Seed = 0


class EvaluateRetrievalParams(BaseModel):
    adapter_job_id: JobId
    items: int = Field(default=1000, ge=8, le=10_000)
    relevance_threshold: float = Field(default=0.75, gt=0.0, le=1.0)
    seed: Seed = 0


class ClassifyParams(BaseModel):
    """The sync Classify RPC's fields (the image is checked separately). The model: a train_clip
    job or a user's checkpoint folder, exactly one (the servicer refuses naming model_job_id)."""

    model_job_id: str = Field(default="", max_length=128)
    checkpoint: InputRefParams | None = None
    classes: list[Name] = Field(default=[], max_length=MAX_CLASSES)
    descriptors: list[Descriptor] = Field(default=[], max_length=MAX_DESCRIPTORS)
    method: Method = "zero_shot"
    views: int = Field(default=64, ge=2, le=128)
    stream_id: str = Field(default="", max_length=128)
    reset_stream: bool = False
    seed: Seed = 0

    @model_validator(mode="after")
    def distinct(self):
        if len(set(self.classes)) != len(self.classes):
            raise ValueError("classes: each name at most once")
        if self.classes and len(self.classes) < 2:
            raise ValueError("classes: at least 2 names (or none for the world's shapes)")
        return self


class ScorePairsParams(BaseModel):
    adapter_job_id: JobId
    texts: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(min_length=1, max_length=64)


def _kind(name, params, rpc, description, result):
    return JobKind(
        name=name,
        params=params,
        handler=f"paperworks.services.clip.tasks:run_{name}",
        submit_rpc=rpc,
        description=description,
        result=result,
    )


SPEC = ServiceSpec(
    name="clip",
    description="RITA robust test-time prompt adaptation (arXiv 2607.09450) and VACSR variational "
    "similarity adapters (arXiv 2605.30968) for CLIP, on a tiny CLIP trained on a generated world "
    "or a user's checkpoint.",
    servicer="paperworks.services.clip.servicer:ClipServicer",
    grpc_module="paperworks.clip.v1.clip_pb2_grpc",
    grpc_service="ClipService",
    port=50059,  # host port in Compose (services/README.md step 10); never changes
    kinds={
        "train_clip": _kind(
            "train_clip",
            TrainCLIPParams,
            "SubmitTrainCLIP",
            "generated image-caption world -> tiny CLIP (model.safetensors, announced)",
            {
                "final_loss": "mean contrastive loss of the last 10% of steps (nats)",
                "zero_shot_accuracy": "held-out shape accuracy, 'a photo of a {shape}' (fraction)",
                "retrieval_r1": "held-out image->full-caption R@1 among 500 items (fraction)",
                "parameters": "model parameters (count)",
            },
        ),
        "evaluate_robustness": _kind(
            "evaluate_robustness",
            EvaluateRobustnessParams,
            "SubmitEvaluateRobustness",
            "model + test images -> PGD attack x method table (accuracy, seconds per image)",
            {
                "rows": "one {eps_255, method, accuracy, correct, n, seconds_per_image} per cell",
                "n": "test images (count)",
                "best_robust_method": "highest accuracy at the largest eps",
            },
        ),
        "train_adapter": _kind(
            "train_adapter",
            TrainAdapterParams,
            "SubmitTrainAdapter",
            "frozen CLIP features of the world -> VACSR or baseline adapter (adapter.safetensors)",
            {
                "adapter": "vacsr, infonce, sigmoid, pcme or zero_shot",
                "epochs": "epochs run (count)",
                "val_rsum": "best validation RSUM (sum of six recalls, percent)",
            },
        ),
        "evaluate_retrieval": _kind(
            "evaluate_retrieval",
            EvaluateRetrievalParams,
            "SubmitEvaluateRetrieval",
            "adapter -> R@1/5/10 both ways, RSUM, mAP@R on fresh world items",
            {"metrics": "retrieval metrics of the adapter (percent)", "items": "test items (count)"},
        ),
    },
)
