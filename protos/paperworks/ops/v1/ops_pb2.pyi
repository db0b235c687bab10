from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitDigestRequest(_message.Message):
    __slots__ = ("seed", "steps", "rounds_per_step", "fail_once_at_step", "idempotency_key")
    SEED_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_PER_STEP_FIELD_NUMBER: _ClassVar[int]
    FAIL_ONCE_AT_STEP_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    seed: int
    steps: int
    rounds_per_step: int
    fail_once_at_step: int
    idempotency_key: str
    def __init__(self, seed: _Optional[int] = ..., steps: _Optional[int] = ..., rounds_per_step: _Optional[int] = ..., fail_once_at_step: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitDigestResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class ComputeDigestRequest(_message.Message):
    __slots__ = ("seed", "steps", "rounds_per_step")
    SEED_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_PER_STEP_FIELD_NUMBER: _ClassVar[int]
    seed: int
    steps: int
    rounds_per_step: int
    def __init__(self, seed: _Optional[int] = ..., steps: _Optional[int] = ..., rounds_per_step: _Optional[int] = ...) -> None: ...

class ComputeDigestResponse(_message.Message):
    __slots__ = ("digest", "checkpoints")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    digest: str
    checkpoints: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, digest: _Optional[str] = ..., checkpoints: _Optional[_Iterable[str]] = ...) -> None: ...
