from google.protobuf import struct_pb2 as _struct_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Step(_message.Message):
    __slots__ = ("name", "service", "kind", "params", "after", "retries")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    service: str
    kind: str
    params: _struct_pb2.Struct
    after: _containers.RepeatedScalarFieldContainer[str]
    retries: int
    def __init__(self, name: _Optional[str] = ..., service: _Optional[str] = ..., kind: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., after: _Optional[_Iterable[str]] = ..., retries: _Optional[int] = ...) -> None: ...

class SubmitRunRequest(_message.Message):
    __slots__ = ("steps", "idempotency_key")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[Step]
    idempotency_key: str
    def __init__(self, steps: _Optional[_Iterable[_Union[Step, _Mapping]]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitRunResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class ValidateRunRequest(_message.Message):
    __slots__ = ("steps",)
    STEPS_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[Step]
    def __init__(self, steps: _Optional[_Iterable[_Union[Step, _Mapping]]] = ...) -> None: ...

class ValidateRunResponse(_message.Message):
    __slots__ = ("order",)
    ORDER_FIELD_NUMBER: _ClassVar[int]
    order: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, order: _Optional[_Iterable[str]] = ...) -> None: ...
