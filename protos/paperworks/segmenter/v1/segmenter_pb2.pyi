from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SyntheticVolumes(_message.Message):
    __slots__ = ("seed", "count", "size", "lesions", "lesion_radius", "lesion_contrast", "noise", "blur")
    SEED_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    LESIONS_FIELD_NUMBER: _ClassVar[int]
    LESION_RADIUS_FIELD_NUMBER: _ClassVar[int]
    LESION_CONTRAST_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    BLUR_FIELD_NUMBER: _ClassVar[int]
    seed: int
    count: int
    size: int
    lesions: int
    lesion_radius: float
    lesion_contrast: float
    noise: float
    blur: float
    def __init__(self, seed: _Optional[int] = ..., count: _Optional[int] = ..., size: _Optional[int] = ..., lesions: _Optional[int] = ..., lesion_radius: _Optional[float] = ..., lesion_contrast: _Optional[float] = ..., noise: _Optional[float] = ..., blur: _Optional[float] = ...) -> None: ...

class DatasetSource(_message.Message):
    __slots__ = ("path", "synthetic", "source", "limit")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SYNTHETIC_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    path: str
    synthetic: SyntheticVolumes
    source: _common_pb2.InputRef
    limit: int
    def __init__(self, path: _Optional[str] = ..., synthetic: _Optional[_Union[SyntheticVolumes, _Mapping]] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., limit: _Optional[int] = ...) -> None: ...

class SubmitFitMinorParamsRequest(_message.Message):
    __slots__ = ("dataset", "trials", "optimizer", "max_volumes", "seed", "idempotency_key")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    MAX_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    dataset: DatasetSource
    trials: int
    optimizer: str
    max_volumes: int
    seed: int
    idempotency_key: str
    def __init__(self, dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., trials: _Optional[int] = ..., optimizer: _Optional[str] = ..., max_volumes: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitFitMinorParamsResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitTrainSegmenterRequest(_message.Message):
    __slots__ = ("minor_job_id", "dataset", "structures", "structure_names", "steps", "hidden", "layers", "learning_rate", "seed", "idempotency_key")
    MINOR_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    STRUCTURES_FIELD_NUMBER: _ClassVar[int]
    STRUCTURE_NAMES_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    minor_job_id: str
    dataset: DatasetSource
    structures: _containers.RepeatedScalarFieldContainer[int]
    structure_names: _containers.RepeatedScalarFieldContainer[str]
    steps: int
    hidden: int
    layers: int
    learning_rate: float
    seed: int
    idempotency_key: str
    def __init__(self, minor_job_id: _Optional[str] = ..., dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., structures: _Optional[_Iterable[int]] = ..., structure_names: _Optional[_Iterable[str]] = ..., steps: _Optional[int] = ..., hidden: _Optional[int] = ..., layers: _Optional[int] = ..., learning_rate: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainSegmenterResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitSegmentRequest(_message.Message):
    __slots__ = ("model_job_id", "dataset", "image", "images", "source_job_id", "threshold", "idempotency_key")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    dataset: DatasetSource
    image: _common_pb2.InputRef
    images: _containers.RepeatedScalarFieldContainer[str]
    source_job_id: str
    threshold: float
    idempotency_key: str
    def __init__(self, model_job_id: _Optional[str] = ..., dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., image: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., images: _Optional[_Iterable[str]] = ..., source_job_id: _Optional[str] = ..., threshold: _Optional[float] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitSegmentResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitTrainDenoiserRequest(_message.Message):
    __slots__ = ("dataset", "backbone", "wrapper", "noise_sigma", "steps", "batch_size", "learning_rate", "seed", "idempotency_key")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    BACKBONE_FIELD_NUMBER: _ClassVar[int]
    WRAPPER_FIELD_NUMBER: _ClassVar[int]
    NOISE_SIGMA_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    dataset: DatasetSource
    backbone: str
    wrapper: str
    noise_sigma: float
    steps: int
    batch_size: int
    learning_rate: float
    seed: int
    idempotency_key: str
    def __init__(self, dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., backbone: _Optional[str] = ..., wrapper: _Optional[str] = ..., noise_sigma: _Optional[float] = ..., steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainDenoiserResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class ThenSegment(_message.Message):
    __slots__ = ("model_job_id", "threshold")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    threshold: float
    def __init__(self, model_job_id: _Optional[str] = ..., threshold: _Optional[float] = ...) -> None: ...

class SubmitDenoiseRequest(_message.Message):
    __slots__ = ("model_job_id", "dataset", "image", "images", "then_segment", "idempotency_key")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    THEN_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    dataset: DatasetSource
    image: _common_pb2.InputRef
    images: _containers.RepeatedScalarFieldContainer[str]
    then_segment: ThenSegment
    idempotency_key: str
    def __init__(self, model_job_id: _Optional[str] = ..., dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., image: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., images: _Optional[_Iterable[str]] = ..., then_segment: _Optional[_Union[ThenSegment, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitDenoiseResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class StructureStats(_message.Message):
    __slots__ = ("label", "name", "voxels", "volume_mm3", "components", "mean_intensity")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VOXELS_FIELD_NUMBER: _ClassVar[int]
    VOLUME_MM3_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    MEAN_INTENSITY_FIELD_NUMBER: _ClassVar[int]
    label: int
    name: str
    voxels: int
    volume_mm3: float
    components: int
    mean_intensity: float
    def __init__(self, label: _Optional[int] = ..., name: _Optional[str] = ..., voxels: _Optional[int] = ..., volume_mm3: _Optional[float] = ..., components: _Optional[int] = ..., mean_intensity: _Optional[float] = ...) -> None: ...

class SegmentRequest(_message.Message):
    __slots__ = ("model_job_id", "image_nifti", "image", "spacing", "source", "threshold")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    IMAGE_NIFTI_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    SPACING_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    image_nifti: bytes
    image: _common_pb2.Tensor
    spacing: _containers.RepeatedScalarFieldContainer[float]
    source: _common_pb2.InputRef
    threshold: float
    def __init__(self, model_job_id: _Optional[str] = ..., image_nifti: _Optional[bytes] = ..., image: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., spacing: _Optional[_Iterable[float]] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., threshold: _Optional[float] = ...) -> None: ...

class SegmentResponse(_message.Message):
    __slots__ = ("labels_nifti", "labels", "structures", "supernodes")
    LABELS_NIFTI_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    STRUCTURES_FIELD_NUMBER: _ClassVar[int]
    SUPERNODES_FIELD_NUMBER: _ClassVar[int]
    labels_nifti: bytes
    labels: _common_pb2.Tensor
    structures: _containers.RepeatedCompositeFieldContainer[StructureStats]
    supernodes: int
    def __init__(self, labels_nifti: _Optional[bytes] = ..., labels: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., structures: _Optional[_Iterable[_Union[StructureStats, _Mapping]]] = ..., supernodes: _Optional[int] = ...) -> None: ...

class DenoiseRequest(_message.Message):
    __slots__ = ("model_job_id", "image_nifti", "image", "spacing", "source")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    IMAGE_NIFTI_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    SPACING_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    image_nifti: bytes
    image: _common_pb2.Tensor
    spacing: _containers.RepeatedScalarFieldContainer[float]
    source: _common_pb2.InputRef
    def __init__(self, model_job_id: _Optional[str] = ..., image_nifti: _Optional[bytes] = ..., image: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., spacing: _Optional[_Iterable[float]] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ...) -> None: ...

class DenoiseResponse(_message.Message):
    __slots__ = ("image_nifti", "image")
    IMAGE_NIFTI_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    image_nifti: bytes
    image: _common_pb2.Tensor
    def __init__(self, image_nifti: _Optional[bytes] = ..., image: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...
