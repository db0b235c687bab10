from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EncoderSpec(_message.Message):
    __slots__ = ("name", "tokens", "input_dim", "d_model", "layers", "hf")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_DIM_FIELD_NUMBER: _ClassVar[int]
    D_MODEL_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    HF_FIELD_NUMBER: _ClassVar[int]
    name: str
    tokens: int
    input_dim: int
    d_model: int
    layers: int
    hf: _common_pb2.ModelSpec
    def __init__(self, name: _Optional[str] = ..., tokens: _Optional[int] = ..., input_dim: _Optional[int] = ..., d_model: _Optional[int] = ..., layers: _Optional[int] = ..., hf: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ...) -> None: ...

class ModelDescription(_message.Message):
    __slots__ = ("encoders", "d_model", "llm_layers", "heads", "vocab", "text_tokens", "llm")
    ENCODERS_FIELD_NUMBER: _ClassVar[int]
    D_MODEL_FIELD_NUMBER: _ClassVar[int]
    LLM_LAYERS_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    VOCAB_FIELD_NUMBER: _ClassVar[int]
    TEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    encoders: _containers.RepeatedCompositeFieldContainer[EncoderSpec]
    d_model: int
    llm_layers: int
    heads: int
    vocab: int
    text_tokens: int
    llm: _common_pb2.ModelSpec
    def __init__(self, encoders: _Optional[_Iterable[_Union[EncoderSpec, _Mapping]]] = ..., d_model: _Optional[int] = ..., llm_layers: _Optional[int] = ..., heads: _Optional[int] = ..., vocab: _Optional[int] = ..., text_tokens: _Optional[int] = ..., llm: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ...) -> None: ...

class SequenceStats(_message.Message):
    __slots__ = ("seq_len", "modalities", "samples", "seed", "causal_only")
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    MODALITIES_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    CAUSAL_ONLY_FIELD_NUMBER: _ClassVar[int]
    seq_len: int
    modalities: int
    samples: int
    seed: int
    causal_only: bool
    def __init__(self, seq_len: _Optional[int] = ..., modalities: _Optional[int] = ..., samples: _Optional[int] = ..., seed: _Optional[int] = ..., causal_only: _Optional[bool] = ...) -> None: ...

class SubmitPlanParallelismRequest(_message.Message):
    __slots__ = ("model", "pattern", "world_size", "cp_size", "microbatches", "batch_size", "sequence", "memory_limit_mb", "profile_repeats", "idempotency_key")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    CP_SIZE_FIELD_NUMBER: _ClassVar[int]
    MICROBATCHES_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_MB_FIELD_NUMBER: _ClassVar[int]
    PROFILE_REPEATS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model: ModelDescription
    pattern: str
    world_size: int
    cp_size: int
    microbatches: int
    batch_size: int
    sequence: SequenceStats
    memory_limit_mb: float
    profile_repeats: int
    idempotency_key: str
    def __init__(self, model: _Optional[_Union[ModelDescription, _Mapping]] = ..., pattern: _Optional[str] = ..., world_size: _Optional[int] = ..., cp_size: _Optional[int] = ..., microbatches: _Optional[int] = ..., batch_size: _Optional[int] = ..., sequence: _Optional[_Union[SequenceStats, _Mapping]] = ..., memory_limit_mb: _Optional[float] = ..., profile_repeats: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitPlanParallelismResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitTrainRequest(_message.Message):
    __slots__ = ("model", "pattern", "world_size", "microbatches", "batch_size", "method", "steps", "learning_rate", "seed", "plan_job_id", "idempotency_key")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    MICROBATCHES_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PLAN_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model: ModelDescription
    pattern: str
    world_size: int
    microbatches: int
    batch_size: int
    method: str
    steps: int
    learning_rate: float
    seed: int
    plan_job_id: str
    idempotency_key: str
    def __init__(self, model: _Optional[_Union[ModelDescription, _Mapping]] = ..., pattern: _Optional[str] = ..., world_size: _Optional[int] = ..., microbatches: _Optional[int] = ..., batch_size: _Optional[int] = ..., method: _Optional[str] = ..., steps: _Optional[int] = ..., learning_rate: _Optional[float] = ..., seed: _Optional[int] = ..., plan_job_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SimStage(_message.Message):
    __slots__ = ("forward", "backward", "next")
    FORWARD_FIELD_NUMBER: _ClassVar[int]
    BACKWARD_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    forward: float
    backward: float
    next: int
    def __init__(self, forward: _Optional[float] = ..., backward: _Optional[float] = ..., next: _Optional[int] = ...) -> None: ...

class SubmitSimulateRequest(_message.Message):
    __slots__ = ("stages", "plan_job_id", "microbatches", "comm_latency", "idempotency_key")
    STAGES_FIELD_NUMBER: _ClassVar[int]
    PLAN_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MICROBATCHES_FIELD_NUMBER: _ClassVar[int]
    COMM_LATENCY_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    stages: _containers.RepeatedCompositeFieldContainer[SimStage]
    plan_job_id: str
    microbatches: int
    comm_latency: float
    idempotency_key: str
    def __init__(self, stages: _Optional[_Iterable[_Union[SimStage, _Mapping]]] = ..., plan_job_id: _Optional[str] = ..., microbatches: _Optional[int] = ..., comm_latency: _Optional[float] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitSimulateResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class PlanRequest(_message.Message):
    __slots__ = ("model", "pattern", "world_size", "microbatches", "batch_size")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    MICROBATCHES_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    model: ModelDescription
    pattern: str
    world_size: int
    microbatches: int
    batch_size: int
    def __init__(self, model: _Optional[_Union[ModelDescription, _Mapping]] = ..., pattern: _Optional[str] = ..., world_size: _Optional[int] = ..., microbatches: _Optional[int] = ..., batch_size: _Optional[int] = ...) -> None: ...

class StageTemplate(_message.Message):
    __slots__ = ("layers", "next", "forward", "backward", "memory_bytes")
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    FORWARD_FIELD_NUMBER: _ClassVar[int]
    BACKWARD_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    layers: _containers.RepeatedScalarFieldContainer[str]
    next: int
    forward: float
    backward: float
    memory_bytes: float
    def __init__(self, layers: _Optional[_Iterable[str]] = ..., next: _Optional[int] = ..., forward: _Optional[float] = ..., backward: _Optional[float] = ..., memory_bytes: _Optional[float] = ...) -> None: ...

class PlanResponse(_message.Message):
    __slots__ = ("stages", "predicted_iteration_time", "baselines")
    class BaselinesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    STAGES_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_ITERATION_TIME_FIELD_NUMBER: _ClassVar[int]
    BASELINES_FIELD_NUMBER: _ClassVar[int]
    stages: _containers.RepeatedCompositeFieldContainer[StageTemplate]
    predicted_iteration_time: float
    baselines: _containers.ScalarMap[str, float]
    def __init__(self, stages: _Optional[_Iterable[_Union[StageTemplate, _Mapping]]] = ..., predicted_iteration_time: _Optional[float] = ..., baselines: _Optional[_Mapping[str, float]] = ...) -> None: ...
