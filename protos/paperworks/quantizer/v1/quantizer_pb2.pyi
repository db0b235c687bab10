from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TextSource(_message.Message):
    __slots__ = ("path", "stdlib", "source")
    PATH_FIELD_NUMBER: _ClassVar[int]
    STDLIB_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    path: str
    stdlib: StdlibText
    source: _common_pb2.InputRef
    def __init__(self, path: _Optional[str] = ..., stdlib: _Optional[_Union[StdlibText, _Mapping]] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ...) -> None: ...

class StdlibText(_message.Message):
    __slots__ = ("files", "max_chars", "seed")
    FILES_FIELD_NUMBER: _ClassVar[int]
    MAX_CHARS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    files: int
    max_chars: int
    seed: int
    def __init__(self, files: _Optional[int] = ..., max_chars: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class SubmitQuantizeRequest(_message.Message):
    __slots__ = ("model", "method", "bits", "data", "token_budget", "calibration_windows", "seq_len", "batch_size", "learning_rate", "hidden_weight", "init_sweeps", "greedy_init", "block_steps", "group_size", "seed", "idempotency_key", "block_latent_lr", "e2e_steps", "e2e_latent_lr")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    BITS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_WINDOWS_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    INIT_SWEEPS_FIELD_NUMBER: _ClassVar[int]
    GREEDY_INIT_FIELD_NUMBER: _ClassVar[int]
    BLOCK_STEPS_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    BLOCK_LATENT_LR_FIELD_NUMBER: _ClassVar[int]
    E2E_STEPS_FIELD_NUMBER: _ClassVar[int]
    E2E_LATENT_LR_FIELD_NUMBER: _ClassVar[int]
    model: _common_pb2.ModelSpec
    method: str
    bits: int
    data: TextSource
    token_budget: int
    calibration_windows: int
    seq_len: int
    batch_size: int
    learning_rate: float
    hidden_weight: float
    init_sweeps: int
    greedy_init: bool
    block_steps: int
    group_size: int
    seed: int
    idempotency_key: str
    block_latent_lr: float
    e2e_steps: int
    e2e_latent_lr: float
    def __init__(self, model: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ..., method: _Optional[str] = ..., bits: _Optional[int] = ..., data: _Optional[_Union[TextSource, _Mapping]] = ..., token_budget: _Optional[int] = ..., calibration_windows: _Optional[int] = ..., seq_len: _Optional[int] = ..., batch_size: _Optional[int] = ..., learning_rate: _Optional[float] = ..., hidden_weight: _Optional[float] = ..., init_sweeps: _Optional[int] = ..., greedy_init: _Optional[bool] = ..., block_steps: _Optional[int] = ..., group_size: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., block_latent_lr: _Optional[float] = ..., e2e_steps: _Optional[int] = ..., e2e_latent_lr: _Optional[float] = ...) -> None: ...

class SubmitQuantizeResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitEvaluateRequest(_message.Message):
    __slots__ = ("quantize_job_id", "data", "windows", "seq_len", "idempotency_key")
    QUANTIZE_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    quantize_job_id: str
    data: TextSource
    windows: int
    seq_len: int
    idempotency_key: str
    def __init__(self, quantize_job_id: _Optional[str] = ..., data: _Optional[_Union[TextSource, _Mapping]] = ..., windows: _Optional[int] = ..., seq_len: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("quantize_job_id", "prompts", "max_new_tokens", "temperature", "seed")
    QUANTIZE_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    quantize_job_id: str
    prompts: _containers.RepeatedScalarFieldContainer[str]
    max_new_tokens: int
    temperature: float
    seed: int
    def __init__(self, quantize_job_id: _Optional[str] = ..., prompts: _Optional[_Iterable[str]] = ..., max_new_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., seed: _Optional[int] = ...) -> None: ...

class Completion(_message.Message):
    __slots__ = ("text", "finish_reason", "token_ids", "logprobs")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    text: str
    finish_reason: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, text: _Optional[str] = ..., finish_reason: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[float]] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("completions",)
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    completions: _containers.RepeatedCompositeFieldContainer[Completion]
    def __init__(self, completions: _Optional[_Iterable[_Union[Completion, _Mapping]]] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("quantize_job_id", "prompts", "continuations")
    QUANTIZE_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    CONTINUATIONS_FIELD_NUMBER: _ClassVar[int]
    quantize_job_id: str
    prompts: _containers.RepeatedScalarFieldContainer[str]
    continuations: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, quantize_job_id: _Optional[str] = ..., prompts: _Optional[_Iterable[str]] = ..., continuations: _Optional[_Iterable[str]] = ...) -> None: ...

class ContinuationScore(_message.Message):
    __slots__ = ("logprobs", "total_logprob", "token_ids")
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    total_logprob: float
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, logprobs: _Optional[_Iterable[float]] = ..., total_logprob: _Optional[float] = ..., token_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("scores",)
    SCORES_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedCompositeFieldContainer[ContinuationScore]
    def __init__(self, scores: _Optional[_Iterable[_Union[ContinuationScore, _Mapping]]] = ...) -> None: ...
