from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitPretrainRequest(_message.Message):
    __slots__ = ("task", "text_fraction", "image_fraction", "prior_strength", "d_model", "heads", "vision_layers", "lm_layers", "steps", "batch_size", "learning_rate", "seed", "idempotency_key")
    TASK_FIELD_NUMBER: _ClassVar[int]
    TEXT_FRACTION_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    PRIOR_STRENGTH_FIELD_NUMBER: _ClassVar[int]
    D_MODEL_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    VISION_LAYERS_FIELD_NUMBER: _ClassVar[int]
    LM_LAYERS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    task: str
    text_fraction: float
    image_fraction: float
    prior_strength: float
    d_model: int
    heads: int
    vision_layers: int
    lm_layers: int
    steps: int
    batch_size: int
    learning_rate: float
    seed: int
    idempotency_key: str
    def __init__(self, task: _Optional[str] = ..., text_fraction: _Optional[float] = ..., image_fraction: _Optional[float] = ..., prior_strength: _Optional[float] = ..., d_model: _Optional[int] = ..., heads: _Optional[int] = ..., vision_layers: _Optional[int] = ..., lm_layers: _Optional[int] = ..., steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitPretrainResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SyntheticGrid(_message.Message):
    __slots__ = ("seed", "per_cell")
    SEED_FIELD_NUMBER: _ClassVar[int]
    PER_CELL_FIELD_NUMBER: _ClassVar[int]
    seed: int
    per_cell: int
    def __init__(self, seed: _Optional[int] = ..., per_cell: _Optional[int] = ...) -> None: ...

class SubmitBuildConflictSetRequest(_message.Message):
    __slots__ = ("seed", "per_cell", "idempotency_key")
    SEED_FIELD_NUMBER: _ClassVar[int]
    PER_CELL_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    seed: int
    per_cell: int
    idempotency_key: str
    def __init__(self, seed: _Optional[int] = ..., per_cell: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitBuildConflictSetResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitAuditModalityFollowingRequest(_message.Message):
    __slots__ = ("model_job_id", "model", "conflict_set", "synthetic", "indices", "bins", "bootstrap", "epsilon", "seed", "idempotency_key")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_SET_FIELD_NUMBER: _ClassVar[int]
    SYNTHETIC_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    model: _common_pb2.ModelSpec
    conflict_set: _common_pb2.InputRef
    synthetic: SyntheticGrid
    indices: _containers.RepeatedScalarFieldContainer[str]
    bins: int
    bootstrap: int
    epsilon: float
    seed: int
    idempotency_key: str
    def __init__(self, model_job_id: _Optional[str] = ..., model: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ..., conflict_set: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., synthetic: _Optional[_Union[SyntheticGrid, _Mapping]] = ..., indices: _Optional[_Iterable[str]] = ..., bins: _Optional[int] = ..., bootstrap: _Optional[int] = ..., epsilon: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitAuditModalityFollowingResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitSteerPreferenceRequest(_message.Message):
    __slots__ = ("audit_job_id", "target_modality", "selection", "cases", "epsilon", "steps", "batch_size", "learning_rate", "eval_per_cell", "seed", "idempotency_key")
    AUDIT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_MODALITY_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    CASES_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    EVAL_PER_CELL_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    audit_job_id: str
    target_modality: str
    selection: str
    cases: int
    epsilon: float
    steps: int
    batch_size: int
    learning_rate: float
    eval_per_cell: int
    seed: int
    idempotency_key: str
    def __init__(self, audit_job_id: _Optional[str] = ..., target_modality: _Optional[str] = ..., selection: _Optional[str] = ..., cases: _Optional[int] = ..., epsilon: _Optional[float] = ..., steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., eval_per_cell: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitSteerPreferenceResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitTrainRLRequest(_message.Message):
    __slots__ = ("model_job_id", "algorithm", "base", "steps", "prompts", "group_size", "learning_rate", "updates", "kl_beta", "clip_high", "gamma", "entropy", "prior_strength", "eval_items", "seed", "idempotency_key")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    KL_BETA_FIELD_NUMBER: _ClassVar[int]
    CLIP_HIGH_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    ENTROPY_FIELD_NUMBER: _ClassVar[int]
    PRIOR_STRENGTH_FIELD_NUMBER: _ClassVar[int]
    EVAL_ITEMS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    algorithm: str
    base: str
    steps: int
    prompts: int
    group_size: int
    learning_rate: float
    updates: int
    kl_beta: float
    clip_high: float
    gamma: float
    entropy: float
    prior_strength: float
    eval_items: int
    seed: int
    idempotency_key: str
    def __init__(self, model_job_id: _Optional[str] = ..., algorithm: _Optional[str] = ..., base: _Optional[str] = ..., steps: _Optional[int] = ..., prompts: _Optional[int] = ..., group_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., updates: _Optional[int] = ..., kl_beta: _Optional[float] = ..., clip_high: _Optional[float] = ..., gamma: _Optional[float] = ..., entropy: _Optional[float] = ..., prior_strength: _Optional[float] = ..., eval_items: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainRLResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitTrainSpatialRequest(_message.Message):
    __slots__ = ("arm", "frames", "d_model", "heads", "pretrain_items", "pretrain_steps", "items", "steps", "batch_size", "pretrain_learning_rate", "learning_rate", "seed", "idempotency_key")
    ARM_FIELD_NUMBER: _ClassVar[int]
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    D_MODEL_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    PRETRAIN_ITEMS_FIELD_NUMBER: _ClassVar[int]
    PRETRAIN_STEPS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    PRETRAIN_LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    arm: str
    frames: int
    d_model: int
    heads: int
    pretrain_items: int
    pretrain_steps: int
    items: int
    steps: int
    batch_size: int
    pretrain_learning_rate: float
    learning_rate: float
    seed: int
    idempotency_key: str
    def __init__(self, arm: _Optional[str] = ..., frames: _Optional[int] = ..., d_model: _Optional[int] = ..., heads: _Optional[int] = ..., pretrain_items: _Optional[int] = ..., pretrain_steps: _Optional[int] = ..., items: _Optional[int] = ..., steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., pretrain_learning_rate: _Optional[float] = ..., learning_rate: _Optional[float] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainSpatialResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitEvaluateSpatialRequest(_message.Message):
    __slots__ = ("model_job_id", "items", "seed", "idempotency_key")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    items: int
    seed: int
    idempotency_key: str
    def __init__(self, model_job_id: _Optional[str] = ..., items: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateSpatialResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class AnswerRequest(_message.Message):
    __slots__ = ("model_job_id", "model", "options", "image", "text")
    MODEL_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    model_job_id: str
    model: _common_pb2.ModelSpec
    options: _containers.RepeatedScalarFieldContainer[str]
    image: _common_pb2.Tensor
    text: str
    def __init__(self, model_job_id: _Optional[str] = ..., model: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ..., options: _Optional[_Iterable[str]] = ..., image: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., text: _Optional[str] = ...) -> None: ...

class AnswerResponse(_message.Message):
    __slots__ = ("answer", "options", "probabilities")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    answer: str
    options: _containers.RepeatedScalarFieldContainer[str]
    probabilities: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, answer: _Optional[str] = ..., options: _Optional[_Iterable[str]] = ..., probabilities: _Optional[_Iterable[float]] = ...) -> None: ...
