from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    D_TYPE_UNSPECIFIED: _ClassVar[DType]
    D_TYPE_FLOAT32: _ClassVar[DType]
    D_TYPE_FLOAT64: _ClassVar[DType]
    D_TYPE_FLOAT16: _ClassVar[DType]
    D_TYPE_BFLOAT16: _ClassVar[DType]
    D_TYPE_INT64: _ClassVar[DType]
    D_TYPE_INT32: _ClassVar[DType]
    D_TYPE_INT8: _ClassVar[DType]
    D_TYPE_UINT8: _ClassVar[DType]
    D_TYPE_BOOL: _ClassVar[DType]
D_TYPE_UNSPECIFIED: DType
D_TYPE_FLOAT32: DType
D_TYPE_FLOAT64: DType
D_TYPE_FLOAT16: DType
D_TYPE_BFLOAT16: DType
D_TYPE_INT64: DType
D_TYPE_INT32: DType
D_TYPE_INT8: DType
D_TYPE_UINT8: DType
D_TYPE_BOOL: DType

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: DType
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ArtifactRef(_message.Message):
    __slots__ = ("sha256", "name", "media_type", "size_bytes")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    name: str
    media_type: str
    size_bytes: int
    def __init__(self, sha256: _Optional[str] = ..., name: _Optional[str] = ..., media_type: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("fraction", "stage", "step", "total_steps", "message")
    FRACTION_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    fraction: float
    stage: str
    step: int
    total_steps: int
    message: str
    def __init__(self, fraction: _Optional[float] = ..., stage: _Optional[str] = ..., step: _Optional[int] = ..., total_steps: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class FieldViolation(_message.Message):
    __slots__ = ("field", "description")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    field: str
    description: str
    def __init__(self, field: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ("code", "message", "field_violations", "retryable")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    field_violations: _containers.RepeatedCompositeFieldContainer[FieldViolation]
    retryable: bool
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., field_violations: _Optional[_Iterable[_Union[FieldViolation, _Mapping]]] = ..., retryable: _Optional[bool] = ...) -> None: ...

class ModelSpec(_message.Message):
    __slots__ = ("kind", "path", "url", "model", "api_key_env", "timeout_s", "max_retries", "max_concurrency", "api", "endpoint", "source")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    API_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    path: str
    url: str
    model: str
    api_key_env: str
    timeout_s: float
    max_retries: int
    max_concurrency: int
    api: str
    endpoint: str
    source: InputRef
    def __init__(self, kind: _Optional[str] = ..., path: _Optional[str] = ..., url: _Optional[str] = ..., model: _Optional[str] = ..., api_key_env: _Optional[str] = ..., timeout_s: _Optional[float] = ..., max_retries: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., api: _Optional[str] = ..., endpoint: _Optional[str] = ..., source: _Optional[_Union[InputRef, _Mapping]] = ...) -> None: ...

class JobArtifactRef(_message.Message):
    __slots__ = ("job_id", "name")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    name: str
    def __init__(self, job_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class InputRef(_message.Message):
    __slots__ = ("upload", "artifact", "uri", "path")
    UPLOAD_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    upload: str
    artifact: JobArtifactRef
    uri: str
    path: str
    def __init__(self, upload: _Optional[str] = ..., artifact: _Optional[_Union[JobArtifactRef, _Mapping]] = ..., uri: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...
