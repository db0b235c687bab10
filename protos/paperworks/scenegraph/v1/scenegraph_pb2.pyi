from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SyntheticScenes(_message.Message):
    __slots__ = ("seed", "images", "overlap_pair_rate")
    SEED_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_PAIR_RATE_FIELD_NUMBER: _ClassVar[int]
    seed: int
    images: int
    overlap_pair_rate: float
    def __init__(self, seed: _Optional[int] = ..., images: _Optional[int] = ..., overlap_pair_rate: _Optional[float] = ...) -> None: ...

class DatasetSource(_message.Message):
    __slots__ = ("path", "synthetic", "source")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SYNTHETIC_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    path: str
    synthetic: SyntheticScenes
    source: _common_pb2.InputRef
    def __init__(self, path: _Optional[str] = ..., synthetic: _Optional[_Union[SyntheticScenes, _Mapping]] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ...) -> None: ...

class DSNetOptions(_message.Message):
    __slots__ = ("streams", "fusion", "gated")
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    GATED_FIELD_NUMBER: _ClassVar[int]
    streams: str
    fusion: str
    gated: bool
    def __init__(self, streams: _Optional[str] = ..., fusion: _Optional[str] = ..., gated: _Optional[bool] = ...) -> None: ...

class SubmitTrainRequest(_message.Message):
    __slots__ = ("dataset", "base", "head", "dsnet", "image_size", "detector_epochs", "relation_epochs", "max_objects", "seed", "depth_order", "idempotency_key")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    DSNET_FIELD_NUMBER: _ClassVar[int]
    IMAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    DETECTOR_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    RELATION_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    MAX_OBJECTS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    DEPTH_ORDER_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    dataset: DatasetSource
    base: str
    head: str
    dsnet: DSNetOptions
    image_size: int
    detector_epochs: int
    relation_epochs: int
    max_objects: int
    seed: int
    depth_order: bool
    idempotency_key: str
    def __init__(self, dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., base: _Optional[str] = ..., head: _Optional[str] = ..., dsnet: _Optional[_Union[DSNetOptions, _Mapping]] = ..., image_size: _Optional[int] = ..., detector_epochs: _Optional[int] = ..., relation_epochs: _Optional[int] = ..., max_objects: _Optional[int] = ..., seed: _Optional[int] = ..., depth_order: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitEvaluateRequest(_message.Message):
    __slots__ = ("train_job_id", "dataset", "modes", "idempotency_key")
    TRAIN_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    MODES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    train_job_id: str
    dataset: DatasetSource
    modes: _containers.RepeatedScalarFieldContainer[str]
    idempotency_key: str
    def __init__(self, train_job_id: _Optional[str] = ..., dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., modes: _Optional[_Iterable[str]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitPredictRequest(_message.Message):
    __slots__ = ("train_job_id", "dataset", "top_k", "max_drawings", "idempotency_key")
    TRAIN_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MAX_DRAWINGS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    train_job_id: str
    dataset: DatasetSource
    top_k: int
    max_drawings: int
    idempotency_key: str
    def __init__(self, train_job_id: _Optional[str] = ..., dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., top_k: _Optional[int] = ..., max_drawings: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitPredictResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class Box(_message.Message):
    __slots__ = ("x1", "y1", "x2", "y2", "label")
    X1_FIELD_NUMBER: _ClassVar[int]
    Y1_FIELD_NUMBER: _ClassVar[int]
    X2_FIELD_NUMBER: _ClassVar[int]
    Y2_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    x1: float
    y1: float
    x2: float
    y2: float
    label: str
    def __init__(self, x1: _Optional[float] = ..., y1: _Optional[float] = ..., x2: _Optional[float] = ..., y2: _Optional[float] = ..., label: _Optional[str] = ...) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("train_job_id", "image", "source", "boxes", "top_k")
    TRAIN_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    BOXES_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    train_job_id: str
    image: bytes
    source: _common_pb2.InputRef
    boxes: _containers.RepeatedCompositeFieldContainer[Box]
    top_k: int
    def __init__(self, train_job_id: _Optional[str] = ..., image: _Optional[bytes] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., boxes: _Optional[_Iterable[_Union[Box, _Mapping]]] = ..., top_k: _Optional[int] = ...) -> None: ...

class DetectedObject(_message.Message):
    __slots__ = ("index", "box", "score")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    BOX_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    index: int
    box: Box
    score: float
    def __init__(self, index: _Optional[int] = ..., box: _Optional[_Union[Box, _Mapping]] = ..., score: _Optional[float] = ...) -> None: ...

class Triplet(_message.Message):
    __slots__ = ("subject", "predicate", "object", "score", "geometric")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    GEOMETRIC_FIELD_NUMBER: _ClassVar[int]
    subject: int
    predicate: str
    object: int
    score: float
    geometric: bool
    def __init__(self, subject: _Optional[int] = ..., predicate: _Optional[str] = ..., object: _Optional[int] = ..., score: _Optional[float] = ..., geometric: _Optional[bool] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("mode", "objects", "triplets")
    MODE_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    TRIPLETS_FIELD_NUMBER: _ClassVar[int]
    mode: str
    objects: _containers.RepeatedCompositeFieldContainer[DetectedObject]
    triplets: _containers.RepeatedCompositeFieldContainer[Triplet]
    def __init__(self, mode: _Optional[str] = ..., objects: _Optional[_Iterable[_Union[DetectedObject, _Mapping]]] = ..., triplets: _Optional[_Iterable[_Union[Triplet, _Mapping]]] = ...) -> None: ...
