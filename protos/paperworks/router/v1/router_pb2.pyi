from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Loss(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOSS_UNSPECIFIED: _ClassVar[Loss]
    LOSS_TWO_STAGE_CE: _ClassVar[Loss]
    LOSS_MILD: _ClassVar[Loss]
    LOSS_LOGIT_ADJUSTED_CE: _ClassVar[Loss]
LOSS_UNSPECIFIED: Loss
LOSS_TWO_STAGE_CE: Loss
LOSS_MILD: Loss
LOSS_LOGIT_ADJUSTED_CE: Loss

class Agent(_message.Message):
    __slots__ = ("name", "alpha", "beta", "model")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    BETA_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    alpha: float
    beta: float
    model: _common_pb2.ModelSpec
    def __init__(self, name: _Optional[str] = ..., alpha: _Optional[float] = ..., beta: _Optional[float] = ..., model: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ...) -> None: ...

class SyntheticMixture(_message.Message):
    __slots__ = ("n_experts", "dim", "imbalance", "spread", "seed")
    N_EXPERTS_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    IMBALANCE_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    n_experts: int
    dim: int
    imbalance: float
    spread: float
    seed: int
    def __init__(self, n_experts: _Optional[int] = ..., dim: _Optional[int] = ..., imbalance: _Optional[float] = ..., spread: _Optional[float] = ..., seed: _Optional[int] = ...) -> None: ...

class TextFamilies(_message.Message):
    __slots__ = ("imbalance", "seed", "prompts_per_family")
    IMBALANCE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_PER_FAMILY_FIELD_NUMBER: _ClassVar[int]
    imbalance: float
    seed: int
    prompts_per_family: int
    def __init__(self, imbalance: _Optional[float] = ..., seed: _Optional[int] = ..., prompts_per_family: _Optional[int] = ...) -> None: ...

class LoggedOutcomes(_message.Message):
    __slots__ = ("features", "texts", "errors", "agents", "validation_fraction", "test_fraction")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_FRACTION_FIELD_NUMBER: _ClassVar[int]
    TEST_FRACTION_FIELD_NUMBER: _ClassVar[int]
    features: _common_pb2.Tensor
    texts: _containers.RepeatedScalarFieldContainer[str]
    errors: _common_pb2.Tensor
    agents: _containers.RepeatedCompositeFieldContainer[Agent]
    validation_fraction: float
    test_fraction: float
    def __init__(self, features: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., texts: _Optional[_Iterable[str]] = ..., errors: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., agents: _Optional[_Iterable[_Union[Agent, _Mapping]]] = ..., validation_fraction: _Optional[float] = ..., test_fraction: _Optional[float] = ...) -> None: ...

class SubmitTrainRejectorRequest(_message.Message):
    __slots__ = ("synthetic", "text_families", "logged", "loss", "n_train", "n_validation", "n_test", "margin_scales", "gamma", "hidden", "steps", "seed", "compare", "logit_taus", "idempotency_key")
    SYNTHETIC_FIELD_NUMBER: _ClassVar[int]
    TEXT_FAMILIES_FIELD_NUMBER: _ClassVar[int]
    LOGGED_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    N_TRAIN_FIELD_NUMBER: _ClassVar[int]
    N_VALIDATION_FIELD_NUMBER: _ClassVar[int]
    N_TEST_FIELD_NUMBER: _ClassVar[int]
    MARGIN_SCALES_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    COMPARE_FIELD_NUMBER: _ClassVar[int]
    LOGIT_TAUS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    synthetic: SyntheticMixture
    text_families: TextFamilies
    logged: LoggedOutcomes
    loss: Loss
    n_train: int
    n_validation: int
    n_test: int
    margin_scales: _containers.RepeatedScalarFieldContainer[float]
    gamma: float
    hidden: int
    steps: int
    seed: int
    compare: bool
    logit_taus: _containers.RepeatedScalarFieldContainer[float]
    idempotency_key: str
    def __init__(self, synthetic: _Optional[_Union[SyntheticMixture, _Mapping]] = ..., text_families: _Optional[_Union[TextFamilies, _Mapping]] = ..., logged: _Optional[_Union[LoggedOutcomes, _Mapping]] = ..., loss: _Optional[_Union[Loss, str]] = ..., n_train: _Optional[int] = ..., n_validation: _Optional[int] = ..., n_test: _Optional[int] = ..., margin_scales: _Optional[_Iterable[float]] = ..., gamma: _Optional[float] = ..., hidden: _Optional[int] = ..., steps: _Optional[int] = ..., seed: _Optional[int] = ..., compare: _Optional[bool] = ..., logit_taus: _Optional[_Iterable[float]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainRejectorResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class LocalModel(_message.Message):
    __slots__ = ("model", "train_tiny", "quantize_job_id")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TRAIN_TINY_FIELD_NUMBER: _ClassVar[int]
    QUANTIZE_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    model: _common_pb2.ModelSpec
    train_tiny: TrainTiny
    quantize_job_id: str
    def __init__(self, model: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ..., train_tiny: _Optional[_Union[TrainTiny, _Mapping]] = ..., quantize_job_id: _Optional[str] = ...) -> None: ...

class TrainTiny(_message.Message):
    __slots__ = ("steps", "seed", "dim", "layers")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    steps: int
    seed: int
    dim: int
    layers: int
    def __init__(self, steps: _Optional[int] = ..., seed: _Optional[int] = ..., dim: _Optional[int] = ..., layers: _Optional[int] = ...) -> None: ...

class TaskSuite(_message.Message):
    __slots__ = ("families", "max_operand", "max_len", "lookup_keys", "known_fraction", "table_seed", "key_zipf")
    FAMILIES_FIELD_NUMBER: _ClassVar[int]
    MAX_OPERAND_FIELD_NUMBER: _ClassVar[int]
    MAX_LEN_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_KEYS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FRACTION_FIELD_NUMBER: _ClassVar[int]
    TABLE_SEED_FIELD_NUMBER: _ClassVar[int]
    KEY_ZIPF_FIELD_NUMBER: _ClassVar[int]
    families: _containers.RepeatedScalarFieldContainer[str]
    max_operand: int
    max_len: int
    lookup_keys: int
    known_fraction: float
    table_seed: int
    key_zipf: float
    def __init__(self, families: _Optional[_Iterable[str]] = ..., max_operand: _Optional[int] = ..., max_len: _Optional[int] = ..., lookup_keys: _Optional[int] = ..., known_fraction: _Optional[float] = ..., table_seed: _Optional[int] = ..., key_zipf: _Optional[float] = ...) -> None: ...

class RemoteModel(_message.Message):
    __slots__ = ("name", "price", "accuracy", "model")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRICE_FIELD_NUMBER: _ClassVar[int]
    ACCURACY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    price: float
    accuracy: _containers.RepeatedScalarFieldContainer[float]
    model: _common_pb2.ModelSpec
    def __init__(self, name: _Optional[str] = ..., price: _Optional[float] = ..., accuracy: _Optional[_Iterable[float]] = ..., model: _Optional[_Union[_common_pb2.ModelSpec, _Mapping]] = ...) -> None: ...

class PromptSet(_message.Message):
    __slots__ = ("path", "source", "rows", "scorer", "validation_fraction", "test_fraction", "max_answer_tokens")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SCORER_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_FRACTION_FIELD_NUMBER: _ClassVar[int]
    TEST_FRACTION_FIELD_NUMBER: _ClassVar[int]
    MAX_ANSWER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    path: str
    source: _common_pb2.InputRef
    rows: _containers.RepeatedCompositeFieldContainer[PromptRow]
    scorer: str
    validation_fraction: float
    test_fraction: float
    max_answer_tokens: int
    def __init__(self, path: _Optional[str] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., rows: _Optional[_Iterable[_Union[PromptRow, _Mapping]]] = ..., scorer: _Optional[str] = ..., validation_fraction: _Optional[float] = ..., test_fraction: _Optional[float] = ..., max_answer_tokens: _Optional[int] = ...) -> None: ...

class PromptRow(_message.Message):
    __slots__ = ("prompt", "reference", "scorer")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    SCORER_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    reference: str
    scorer: str
    def __init__(self, prompt: _Optional[str] = ..., reference: _Optional[str] = ..., scorer: _Optional[str] = ...) -> None: ...

class SubmitTrainDeciderRequest(_message.Message):
    __slots__ = ("local", "tasks", "prompts", "remotes", "n_train", "n_validation", "n_test", "seed", "hidden", "steps", "components", "query_router_baseline", "max_new_tokens", "idempotency_key")
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    REMOTES_FIELD_NUMBER: _ClassVar[int]
    N_TRAIN_FIELD_NUMBER: _ClassVar[int]
    N_VALIDATION_FIELD_NUMBER: _ClassVar[int]
    N_TEST_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    QUERY_ROUTER_BASELINE_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    local: LocalModel
    tasks: TaskSuite
    prompts: PromptSet
    remotes: _containers.RepeatedCompositeFieldContainer[RemoteModel]
    n_train: int
    n_validation: int
    n_test: int
    seed: int
    hidden: int
    steps: int
    components: int
    query_router_baseline: bool
    max_new_tokens: int
    idempotency_key: str
    def __init__(self, local: _Optional[_Union[LocalModel, _Mapping]] = ..., tasks: _Optional[_Union[TaskSuite, _Mapping]] = ..., prompts: _Optional[_Union[PromptSet, _Mapping]] = ..., remotes: _Optional[_Iterable[_Union[RemoteModel, _Mapping]]] = ..., n_train: _Optional[int] = ..., n_validation: _Optional[int] = ..., n_test: _Optional[int] = ..., seed: _Optional[int] = ..., hidden: _Optional[int] = ..., steps: _Optional[int] = ..., components: _Optional[int] = ..., query_router_baseline: _Optional[bool] = ..., max_new_tokens: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainDeciderResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class RouteRequest(_message.Message):
    __slots__ = ("policy_job_id", "text", "features", "cost_lambda", "budget", "execute", "timeout_s", "max_answer_tokens", "first_line_only")
    POLICY_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    COST_LAMBDA_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_ANSWER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FIRST_LINE_ONLY_FIELD_NUMBER: _ClassVar[int]
    policy_job_id: str
    text: str
    features: _common_pb2.Tensor
    cost_lambda: float
    budget: float
    execute: bool
    timeout_s: float
    max_answer_tokens: int
    first_line_only: bool
    def __init__(self, policy_job_id: _Optional[str] = ..., text: _Optional[str] = ..., features: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., cost_lambda: _Optional[float] = ..., budget: _Optional[float] = ..., execute: _Optional[bool] = ..., timeout_s: _Optional[float] = ..., max_answer_tokens: _Optional[int] = ..., first_line_only: _Optional[bool] = ...) -> None: ...

class OptionScore(_message.Message):
    __slots__ = ("name", "score", "cost", "utility")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    UTILITY_FIELD_NUMBER: _ClassVar[int]
    name: str
    score: float
    cost: float
    utility: float
    def __init__(self, name: _Optional[str] = ..., score: _Optional[float] = ..., cost: _Optional[float] = ..., utility: _Optional[float] = ...) -> None: ...

class RouteResponse(_message.Message):
    __slots__ = ("agent", "agent_index", "scores", "accepted_local", "local_answer", "executed", "answer", "policy_kind", "policy_sha256", "cost_lambda", "decision_ms", "finish_reason")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    AGENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_LOCAL_FIELD_NUMBER: _ClassVar[int]
    LOCAL_ANSWER_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    POLICY_KIND_FIELD_NUMBER: _ClassVar[int]
    POLICY_SHA256_FIELD_NUMBER: _ClassVar[int]
    COST_LAMBDA_FIELD_NUMBER: _ClassVar[int]
    DECISION_MS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    agent: str
    agent_index: int
    scores: _containers.RepeatedCompositeFieldContainer[OptionScore]
    accepted_local: bool
    local_answer: str
    executed: bool
    answer: str
    policy_kind: str
    policy_sha256: str
    cost_lambda: float
    decision_ms: float
    finish_reason: str
    def __init__(self, agent: _Optional[str] = ..., agent_index: _Optional[int] = ..., scores: _Optional[_Iterable[_Union[OptionScore, _Mapping]]] = ..., accepted_local: _Optional[bool] = ..., local_answer: _Optional[str] = ..., executed: _Optional[bool] = ..., answer: _Optional[str] = ..., policy_kind: _Optional[str] = ..., policy_sha256: _Optional[str] = ..., cost_lambda: _Optional[float] = ..., decision_ms: _Optional[float] = ..., finish_reason: _Optional[str] = ...) -> None: ...
