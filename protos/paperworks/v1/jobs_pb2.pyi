import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from paperworks.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_QUEUED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_SUCCEEDED: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]

class JobEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_EVENT_TYPE_UNSPECIFIED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_STATE_CHANGED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_PROGRESS: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_ARTIFACT_ADDED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_CANCEL_REQUESTED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_RETRYING: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_MODEL_READY: _ClassVar[JobEventType]
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_QUEUED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_SUCCEEDED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_CANCELLED: JobState
JOB_EVENT_TYPE_UNSPECIFIED: JobEventType
JOB_EVENT_TYPE_STATE_CHANGED: JobEventType
JOB_EVENT_TYPE_PROGRESS: JobEventType
JOB_EVENT_TYPE_ARTIFACT_ADDED: JobEventType
JOB_EVENT_TYPE_CANCEL_REQUESTED: JobEventType
JOB_EVENT_TYPE_RETRYING: JobEventType
JOB_EVENT_TYPE_MODEL_READY: JobEventType

class Job(_message.Message):
    __slots__ = ("id", "service", "kind", "state", "progress", "params", "result", "artifacts", "error", "idempotency_key", "cancel_requested", "attempts", "create_time", "update_time", "start_time", "end_time", "parent_job_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    service: str
    kind: str
    state: JobState
    progress: _common_pb2.Progress
    params: _struct_pb2.Struct
    result: _struct_pb2.Struct
    artifacts: _containers.RepeatedCompositeFieldContainer[_common_pb2.ArtifactRef]
    error: _common_pb2.ErrorDetail
    idempotency_key: str
    cancel_requested: bool
    attempts: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    parent_job_id: str
    def __init__(self, id: _Optional[str] = ..., service: _Optional[str] = ..., kind: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., artifacts: _Optional[_Iterable[_Union[_common_pb2.ArtifactRef, _Mapping]]] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., cancel_requested: _Optional[bool] = ..., attempts: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parent_job_id: _Optional[str] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("job_id", "seq", "type", "state", "progress", "message", "artifact", "time")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    seq: int
    type: JobEventType
    state: JobState
    progress: _common_pb2.Progress
    message: str
    artifact: _common_pb2.ArtifactRef
    time: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., seq: _Optional[int] = ..., type: _Optional[_Union[JobEventType, str]] = ..., state: _Optional[_Union[JobState, str]] = ..., progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ..., message: _Optional[str] = ..., artifact: _Optional[_Union[_common_pb2.ArtifactRef, _Mapping]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ValidateJobRequest(_message.Message):
    __slots__ = ("kind", "params", "deferred_inputs")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_INPUTS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    params: _struct_pb2.Struct
    deferred_inputs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, kind: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., deferred_inputs: _Optional[_Iterable[str]] = ...) -> None: ...

class ValidateJobResponse(_message.Message):
    __slots__ = ("params",)
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    params: _struct_pb2.Struct
    def __init__(self, params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class UploadHeader(_message.Message):
    __slots__ = ("name", "media_type", "sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    media_type: str
    sha256: str
    def __init__(self, name: _Optional[str] = ..., media_type: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class UploadArtifactRequest(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: UploadHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadArtifactResponse(_message.Message):
    __slots__ = ("artifact", "expire_time")
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    artifact: _common_pb2.ArtifactRef
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, artifact: _Optional[_Union[_common_pb2.ArtifactRef, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DescribeServiceRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JobKindInfo(_message.Message):
    __slots__ = ("name", "description", "submit_rpc", "params_schema_json", "result_legend")
    class ResultLegendEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_RPC_FIELD_NUMBER: _ClassVar[int]
    PARAMS_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    RESULT_LEGEND_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    submit_rpc: str
    params_schema_json: str
    result_legend: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., submit_rpc: _Optional[str] = ..., params_schema_json: _Optional[str] = ..., result_legend: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RpcInfo(_message.Message):
    __slots__ = ("name", "request_type", "response_type", "client_streaming", "server_streaming", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_STREAMING_FIELD_NUMBER: _ClassVar[int]
    SERVER_STREAMING_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_type: str
    response_type: str
    client_streaming: bool
    server_streaming: bool
    description: str
    def __init__(self, name: _Optional[str] = ..., request_type: _Optional[str] = ..., response_type: _Optional[str] = ..., client_streaming: _Optional[bool] = ..., server_streaming: _Optional[bool] = ..., description: _Optional[str] = ...) -> None: ...

class DescribeServiceResponse(_message.Message):
    __slots__ = ("service", "description", "kinds", "rpcs")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    RPCS_FIELD_NUMBER: _ClassVar[int]
    service: str
    description: str
    kinds: _containers.RepeatedCompositeFieldContainer[JobKindInfo]
    rpcs: _containers.RepeatedCompositeFieldContainer[RpcInfo]
    def __init__(self, service: _Optional[str] = ..., description: _Optional[str] = ..., kinds: _Optional[_Iterable[_Union[JobKindInfo, _Mapping]]] = ..., rpcs: _Optional[_Iterable[_Union[RpcInfo, _Mapping]]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "kind", "states")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    kind: str
    states: _containers.RepeatedScalarFieldContainer[JobState]
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., kind: _Optional[str] = ..., states: _Optional[_Iterable[_Union[JobState, str]]] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("job_id", "after_seq")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    after_seq: int
    def __init__(self, job_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WatchJobResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: JobEvent
    def __init__(self, event: _Optional[_Union[JobEvent, _Mapping]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class GetArtifactRequest(_message.Message):
    __slots__ = ("job_id", "sha256", "chunk_bytes")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    sha256: str
    chunk_bytes: int
    def __init__(self, job_id: _Optional[str] = ..., sha256: _Optional[str] = ..., chunk_bytes: _Optional[int] = ...) -> None: ...

class GetArtifactResponse(_message.Message):
    __slots__ = ("artifact", "offset", "data")
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    artifact: _common_pb2.ArtifactRef
    offset: int
    data: bytes
    def __init__(self, artifact: _Optional[_Union[_common_pb2.ArtifactRef, _Mapping]] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...
