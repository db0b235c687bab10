from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelSource(_message.Message):
    __slots__ = ("model_job_id", "checkpoint")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    checkpoint: _common_pb2.InputRef
    def __init__(self, model_job_id: _Optional[str] = ..., checkpoint: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ...) -> None: ...

class SubmitTrainCLIPRequest(_message.Message):
    __slots__ = ("steps", "batch_size", "learning_rate", "width", "vision_layers", "text_layers", "patch_size", "seed", "idempotency_key")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    VISION_LAYERS_FIELD_NUMBER: _ClassVar[int]
    TEXT_LAYERS_FIELD_NUMBER: _ClassVar[int]
    PATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    steps: int
    batch_size: int
    learning_rate: float
    width: int
    vision_layers: int
    text_layers: int
    patch_size: int
    seed: int
    idempotency_key: str
    def __init__(self, steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., width: _Optional[int] = ..., vision_layers: _Optional[int] = ..., text_layers: _Optional[int] = ..., patch_size: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainCLIPResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class TestImages(_message.Message):
    __slots__ = ("world", "images", "classes", "descriptors")
    WORLD_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    world: WorldImages
    images: _common_pb2.InputRef
    classes: _containers.RepeatedScalarFieldContainer[str]
    descriptors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, world: _Optional[_Union[WorldImages, _Mapping]] = ..., images: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., classes: _Optional[_Iterable[str]] = ..., descriptors: _Optional[_Iterable[str]] = ...) -> None: ...

class WorldImages(_message.Message):
    __slots__ = ("seed", "n")
    SEED_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    seed: int
    n: int
    def __init__(self, seed: _Optional[int] = ..., n: _Optional[int] = ...) -> None: ...

class SubmitEvaluateRobustnessRequest(_message.Message):
    __slots__ = ("model", "test", "eps_255", "methods", "views", "alpha", "sinkhorn_epsilon", "gamma", "capacity", "tta_loss", "seed", "idempotency_key")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TEST_FIELD_NUMBER: _ClassVar[int]
    EPS_255_FIELD_NUMBER: _ClassVar[int]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    SINKHORN_EPSILON_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    TTA_LOSS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model: ModelSource
    test: TestImages
    eps_255: _containers.RepeatedScalarFieldContainer[float]
    methods: _containers.RepeatedScalarFieldContainer[str]
    views: int
    alpha: float
    sinkhorn_epsilon: float
    gamma: float
    capacity: int
    tta_loss: str
    seed: int
    idempotency_key: str
    def __init__(self, model: _Optional[_Union[ModelSource, _Mapping]] = ..., test: _Optional[_Union[TestImages, _Mapping]] = ..., eps_255: _Optional[_Iterable[float]] = ..., methods: _Optional[_Iterable[str]] = ..., views: _Optional[int] = ..., alpha: _Optional[float] = ..., sinkhorn_epsilon: _Optional[float] = ..., gamma: _Optional[float] = ..., capacity: _Optional[int] = ..., tta_loss: _Optional[str] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateRobustnessResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitTrainAdapterRequest(_message.Message):
    __slots__ = ("model", "adapter", "train_items", "val_items", "noise", "epochs", "batch_size", "learning_rate", "seed", "idempotency_key")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    TRAIN_ITEMS_FIELD_NUMBER: _ClassVar[int]
    VAL_ITEMS_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model: ModelSource
    adapter: str
    train_items: int
    val_items: int
    noise: float
    epochs: int
    batch_size: int
    learning_rate: float
    seed: int
    idempotency_key: str
    def __init__(self, model: _Optional[_Union[ModelSource, _Mapping]] = ..., adapter: _Optional[str] = ..., train_items: _Optional[int] = ..., val_items: _Optional[int] = ..., noise: _Optional[float] = ..., epochs: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainAdapterResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitEvaluateRetrievalRequest(_message.Message):
    __slots__ = ("adapter_job_id", "items", "relevance_threshold", "seed", "idempotency_key")
    ADAPTER_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    adapter_job_id: str
    items: int
    relevance_threshold: float
    seed: int
    idempotency_key: str
    def __init__(self, adapter_job_id: _Optional[str] = ..., items: _Optional[int] = ..., relevance_threshold: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateRetrievalResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class ClassifyRequest(_message.Message):
    __slots__ = ("model_job_id", "checkpoint", "image", "classes", "descriptors", "method", "views", "stream_id", "reset_stream", "seed")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    RESET_STREAM_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    checkpoint: _common_pb2.InputRef
    image: _common_pb2.Tensor
    classes: _containers.RepeatedScalarFieldContainer[str]
    descriptors: _containers.RepeatedScalarFieldContainer[str]
    method: str
    views: int
    stream_id: str
    reset_stream: bool
    seed: int
    def __init__(self, model_job_id: _Optional[str] = ..., checkpoint: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., image: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., classes: _Optional[_Iterable[str]] = ..., descriptors: _Optional[_Iterable[str]] = ..., method: _Optional[str] = ..., views: _Optional[int] = ..., stream_id: _Optional[str] = ..., reset_stream: _Optional[bool] = ..., seed: _Optional[int] = ...) -> None: ...

class ClassifyResponse(_message.Message):
    __slots__ = ("label", "classes", "scores", "method", "runtime_s", "cache_entries")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_S_FIELD_NUMBER: _ClassVar[int]
    CACHE_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    label: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    scores: _containers.RepeatedScalarFieldContainer[float]
    method: str
    runtime_s: float
    cache_entries: int
    def __init__(self, label: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., scores: _Optional[_Iterable[float]] = ..., method: _Optional[str] = ..., runtime_s: _Optional[float] = ..., cache_entries: _Optional[int] = ...) -> None: ...

class ScorePairsRequest(_message.Message):
    __slots__ = ("adapter_job_id", "images", "texts")
    ADAPTER_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    adapter_job_id: str
    images: _common_pb2.Tensor
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, adapter_job_id: _Optional[str] = ..., images: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., texts: _Optional[_Iterable[str]] = ...) -> None: ...

class ScorePairsResponse(_message.Message):
    __slots__ = ("scores", "uncertainties", "has_uncertainty")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    UNCERTAINTIES_FIELD_NUMBER: _ClassVar[int]
    HAS_UNCERTAINTY_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedScalarFieldContainer[float]
    uncertainties: _containers.RepeatedScalarFieldContainer[float]
    has_uncertainty: bool
    def __init__(self, scores: _Optional[_Iterable[float]] = ..., uncertainties: _Optional[_Iterable[float]] = ..., has_uncertainty: _Optional[bool] = ...) -> None: ...
