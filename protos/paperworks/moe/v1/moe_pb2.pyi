from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class World(_message.Message):
    __slots__ = ("seed", "d_in", "classes", "length", "noise")
    SEED_FIELD_NUMBER: _ClassVar[int]
    D_IN_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    seed: int
    d_in: int
    classes: int
    length: int
    noise: float
    def __init__(self, seed: _Optional[int] = ..., d_in: _Optional[int] = ..., classes: _Optional[int] = ..., length: _Optional[int] = ..., noise: _Optional[float] = ...) -> None: ...

class SubmitUpcycleRequest(_message.Message):
    __slots__ = ("dense", "world", "d_model", "heads", "d_ff", "layers", "dense_steps", "batch_size", "learning_rate", "experts", "top_k", "init", "drop_ratio", "seed", "idempotency_key", "base")
    DENSE_FIELD_NUMBER: _ClassVar[int]
    WORLD_FIELD_NUMBER: _ClassVar[int]
    D_MODEL_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    D_FF_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    DENSE_STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    EXPERTS_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    INIT_FIELD_NUMBER: _ClassVar[int]
    DROP_RATIO_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    dense: _common_pb2.InputRef
    world: World
    d_model: int
    heads: int
    d_ff: int
    layers: int
    dense_steps: int
    batch_size: int
    learning_rate: float
    experts: int
    top_k: int
    init: str
    drop_ratio: float
    seed: int
    idempotency_key: str
    base: _common_pb2.ModelSpec
    def __init__(self, dense: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., world: _Optional[_Union[World, _Mapping]] = ..., d_model: _Optional[int] = ..., heads: _Optional[int] = ..., d_ff: _Optional[int] = ..., layers: _Optional[int] = ..., dense_steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., experts: _Optional[int] = ..., top_k: _Optional[int] = ..., init: _Optional[str] = ..., drop_ratio: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., base: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ...) -> None: ...

class SubmitUpcycleResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class RouterTerm(_message.Message):
    __slots__ = ("type", "weight", "alpha", "per_modality", "warmup_steps", "rate")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    PER_MODALITY_FIELD_NUMBER: _ClassVar[int]
    WARMUP_STEPS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    type: str
    weight: float
    alpha: _containers.RepeatedScalarFieldContainer[float]
    per_modality: _containers.RepeatedCompositeFieldContainer[Alpha]
    warmup_steps: int
    rate: float
    def __init__(self, type: _Optional[str] = ..., weight: _Optional[float] = ..., alpha: _Optional[_Iterable[float]] = ..., per_modality: _Optional[_Iterable[_Union[Alpha, _Mapping]]] = ..., warmup_steps: _Optional[int] = ..., rate: _Optional[float] = ...) -> None: ...

class Alpha(_message.Message):
    __slots__ = ("alpha",)
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    alpha: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, alpha: _Optional[_Iterable[float]] = ...) -> None: ...

class SubmitTrainMoeRequest(_message.Message):
    __slots__ = ("model_job_id", "router_losses", "steps", "batch_size", "learning_rate", "router_learning_rate", "eval_sequences", "seed", "idempotency_key", "text", "seq_len")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTER_LOSSES_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    ROUTER_LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    EVAL_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    router_losses: _containers.RepeatedCompositeFieldContainer[RouterTerm]
    steps: int
    batch_size: int
    learning_rate: float
    router_learning_rate: float
    eval_sequences: int
    seed: int
    idempotency_key: str
    text: _common_pb2.InputRef
    seq_len: int
    def __init__(self, model_job_id: _Optional[str] = ..., router_losses: _Optional[_Iterable[_Union[RouterTerm, _Mapping]]] = ..., steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., router_learning_rate: _Optional[float] = ..., eval_sequences: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., text: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., seq_len: _Optional[int] = ...) -> None: ...

class SubmitTrainMoeResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitEvaluateRoutingRequest(_message.Message):
    __slots__ = ("model_job_id", "sequences", "modality_share", "alpha", "seed", "idempotency_key")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    MODALITY_SHARE_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    sequences: int
    modality_share: float
    alpha: _containers.RepeatedScalarFieldContainer[float]
    seed: int
    idempotency_key: str
    def __init__(self, model_job_id: _Optional[str] = ..., sequences: _Optional[int] = ..., modality_share: _Optional[float] = ..., alpha: _Optional[_Iterable[float]] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateRoutingResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitTrainSkillPolicyRequest(_message.Message):
    __slots__ = ("arm", "head", "demos_per_task", "steps", "batch_size", "learning_rate", "seed", "idempotency_key")
    ARM_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    DEMOS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    arm: str
    head: str
    demos_per_task: int
    steps: int
    batch_size: int
    learning_rate: float
    seed: int
    idempotency_key: str
    def __init__(self, arm: _Optional[str] = ..., head: _Optional[str] = ..., demos_per_task: _Optional[int] = ..., steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainSkillPolicyResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitEvaluateSkillsRequest(_message.Message):
    __slots__ = ("model_job_id", "episodes_per_task", "max_steps", "seed", "idempotency_key")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODES_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    episodes_per_task: int
    max_steps: int
    seed: int
    idempotency_key: str
    def __init__(self, model_job_id: _Optional[str] = ..., episodes_per_task: _Optional[int] = ..., max_steps: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateSkillsResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class RouteRequest(_message.Message):
    __slots__ = ("model_job_id", "inputs")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    inputs: _common_pb2.Tensor
    def __init__(self, model_job_id: _Optional[str] = ..., inputs: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class RouteResponse(_message.Message):
    __slots__ = ("probabilities", "selected")
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    probabilities: _common_pb2.Tensor
    selected: _common_pb2.Tensor
    def __init__(self, probabilities: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., selected: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class ActRequest(_message.Message):
    __slots__ = ("model_job_id", "observation", "instruction")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    observation: _common_pb2.Tensor
    instruction: str
    def __init__(self, model_job_id: _Optional[str] = ..., observation: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., instruction: _Optional[str] = ...) -> None: ...

class ActResponse(_message.Message):
    __slots__ = ("actions",)
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    actions: _common_pb2.Tensor
    def __init__(self, actions: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...
