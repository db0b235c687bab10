from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DatasetSource(_message.Message):
    __slots__ = ("path", "synthetic", "source")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SYNTHETIC_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    path: str
    synthetic: SyntheticWorld
    source: _common_pb2.InputRef
    def __init__(self, path: _Optional[str] = ..., synthetic: _Optional[_Union[SyntheticWorld, _Mapping]] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ...) -> None: ...

class SyntheticWorld(_message.Message):
    __slots__ = ("seed", "cities", "locations_per_city", "missing_rate")
    SEED_FIELD_NUMBER: _ClassVar[int]
    CITIES_FIELD_NUMBER: _ClassVar[int]
    LOCATIONS_PER_CITY_FIELD_NUMBER: _ClassVar[int]
    MISSING_RATE_FIELD_NUMBER: _ClassVar[int]
    seed: int
    cities: int
    locations_per_city: int
    missing_rate: float
    def __init__(self, seed: _Optional[int] = ..., cities: _Optional[int] = ..., locations_per_city: _Optional[int] = ..., missing_rate: _Optional[float] = ...) -> None: ...

class SubmitPretrainRequest(_message.Message):
    __slots__ = ("dataset", "modalities", "exclude_regions", "extractors", "embed_dim", "layers", "heads", "reconstruction_weight", "view_overlap", "steps", "batch_size", "learning_rate", "seed", "idempotency_key")
    class ExtractorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DATASET_FIELD_NUMBER: _ClassVar[int]
    MODALITIES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_REGIONS_FIELD_NUMBER: _ClassVar[int]
    EXTRACTORS_FIELD_NUMBER: _ClassVar[int]
    EMBED_DIM_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    RECONSTRUCTION_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    VIEW_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    dataset: DatasetSource
    modalities: _containers.RepeatedScalarFieldContainer[str]
    exclude_regions: _containers.RepeatedScalarFieldContainer[str]
    extractors: _containers.ScalarMap[str, str]
    embed_dim: int
    layers: int
    heads: int
    reconstruction_weight: float
    view_overlap: float
    steps: int
    batch_size: int
    learning_rate: float
    seed: int
    idempotency_key: str
    def __init__(self, dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., modalities: _Optional[_Iterable[str]] = ..., exclude_regions: _Optional[_Iterable[str]] = ..., extractors: _Optional[_Mapping[str, str]] = ..., embed_dim: _Optional[int] = ..., layers: _Optional[int] = ..., heads: _Optional[int] = ..., reconstruction_weight: _Optional[float] = ..., view_overlap: _Optional[float] = ..., steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitPretrainResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitFitTaskRequest(_message.Message):
    __slots__ = ("pretrain_job_id", "dataset", "target", "task_type", "probe", "append_coordinates", "modalities", "holdout_region", "test_fraction", "seed", "idempotency_key")
    PRETRAIN_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    APPEND_COORDINATES_FIELD_NUMBER: _ClassVar[int]
    MODALITIES_FIELD_NUMBER: _ClassVar[int]
    HOLDOUT_REGION_FIELD_NUMBER: _ClassVar[int]
    TEST_FRACTION_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    pretrain_job_id: str
    dataset: DatasetSource
    target: str
    task_type: str
    probe: str
    append_coordinates: bool
    modalities: _containers.RepeatedScalarFieldContainer[str]
    holdout_region: str
    test_fraction: float
    seed: int
    idempotency_key: str
    def __init__(self, pretrain_job_id: _Optional[str] = ..., dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., target: _Optional[str] = ..., task_type: _Optional[str] = ..., probe: _Optional[str] = ..., append_coordinates: _Optional[bool] = ..., modalities: _Optional[_Iterable[str]] = ..., holdout_region: _Optional[str] = ..., test_fraction: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitFitTaskResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("target", "task_type")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    target: str
    task_type: str
    def __init__(self, target: _Optional[str] = ..., task_type: _Optional[str] = ...) -> None: ...

class ModalitySubset(_message.Message):
    __slots__ = ("modalities",)
    MODALITIES_FIELD_NUMBER: _ClassVar[int]
    modalities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, modalities: _Optional[_Iterable[str]] = ...) -> None: ...

class SubmitEvaluateRequest(_message.Message):
    __slots__ = ("pretrain_job_id", "dataset", "tasks", "probe", "subsets", "leave_one_region_out", "test_fraction", "seed", "idempotency_key")
    PRETRAIN_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    SUBSETS_FIELD_NUMBER: _ClassVar[int]
    LEAVE_ONE_REGION_OUT_FIELD_NUMBER: _ClassVar[int]
    TEST_FRACTION_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    pretrain_job_id: str
    dataset: DatasetSource
    tasks: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    probe: str
    subsets: _containers.RepeatedCompositeFieldContainer[ModalitySubset]
    leave_one_region_out: bool
    test_fraction: float
    seed: int
    idempotency_key: str
    def __init__(self, pretrain_job_id: _Optional[str] = ..., dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ..., probe: _Optional[str] = ..., subsets: _Optional[_Iterable[_Union[ModalitySubset, _Mapping]]] = ..., leave_one_region_out: _Optional[bool] = ..., test_fraction: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class ModalityValue(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: _common_pb2.Tensor
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class Location(_message.Message):
    __slots__ = ("id", "lat", "lon", "modalities")
    ID_FIELD_NUMBER: _ClassVar[int]
    LAT_FIELD_NUMBER: _ClassVar[int]
    LON_FIELD_NUMBER: _ClassVar[int]
    MODALITIES_FIELD_NUMBER: _ClassVar[int]
    id: str
    lat: float
    lon: float
    modalities: _containers.RepeatedCompositeFieldContainer[ModalityValue]
    def __init__(self, id: _Optional[str] = ..., lat: _Optional[float] = ..., lon: _Optional[float] = ..., modalities: _Optional[_Iterable[_Union[ModalityValue, _Mapping]]] = ...) -> None: ...

class EmbedRequest(_message.Message):
    __slots__ = ("pretrain_job_id", "locations", "use_modalities")
    PRETRAIN_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    USE_MODALITIES_FIELD_NUMBER: _ClassVar[int]
    pretrain_job_id: str
    locations: _containers.RepeatedCompositeFieldContainer[Location]
    use_modalities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, pretrain_job_id: _Optional[str] = ..., locations: _Optional[_Iterable[_Union[Location, _Mapping]]] = ..., use_modalities: _Optional[_Iterable[str]] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("embeddings", "ids", "used_modalities")
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    USED_MODALITIES_FIELD_NUMBER: _ClassVar[int]
    embeddings: _common_pb2.Tensor
    ids: _containers.RepeatedScalarFieldContainer[str]
    used_modalities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, embeddings: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., ids: _Optional[_Iterable[str]] = ..., used_modalities: _Optional[_Iterable[str]] = ...) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("task_job_id", "locations", "use_modalities")
    TASK_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    USE_MODALITIES_FIELD_NUMBER: _ClassVar[int]
    task_job_id: str
    locations: _containers.RepeatedCompositeFieldContainer[Location]
    use_modalities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, task_job_id: _Optional[str] = ..., locations: _Optional[_Iterable[_Union[Location, _Mapping]]] = ..., use_modalities: _Optional[_Iterable[str]] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("target", "task_type", "ids", "values", "labels", "classes", "probabilities")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    target: str
    task_type: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    values: _containers.RepeatedScalarFieldContainer[float]
    labels: _containers.RepeatedScalarFieldContainer[str]
    classes: _containers.RepeatedScalarFieldContainer[str]
    probabilities: _common_pb2.Tensor
    def __init__(self, target: _Optional[str] = ..., task_type: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ..., values: _Optional[_Iterable[float]] = ..., labels: _Optional[_Iterable[str]] = ..., classes: _Optional[_Iterable[str]] = ..., probabilities: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...
