from google.protobuf import struct_pb2 as _struct_pb2
from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelSpec(_message.Message):
    __slots__ = ("kind", "path", "url", "model", "api_key_env", "timeout_s", "max_retries", "max_concurrency", "builtin", "options", "api", "endpoint", "source")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    BUILTIN_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
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
    builtin: str
    options: _struct_pb2.Struct
    api: str
    endpoint: str
    source: _common_pb2.InputRef
    def __init__(self, kind: _Optional[str] = ..., path: _Optional[str] = ..., url: _Optional[str] = ..., model: _Optional[str] = ..., api_key_env: _Optional[str] = ..., timeout_s: _Optional[float] = ..., max_retries: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., builtin: _Optional[str] = ..., options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., api: _Optional[str] = ..., endpoint: _Optional[str] = ..., source: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ...) -> None: ...

class OptionForms(_message.Message):
    __slots__ = ("options",)
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, options: _Optional[_Iterable[str]] = ...) -> None: ...

class AttributeSpec(_message.Message):
    __slots__ = ("name", "options", "explicit_forms", "implicit_forms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    EXPLICIT_FORMS_FIELD_NUMBER: _ClassVar[int]
    IMPLICIT_FORMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    options: _containers.RepeatedScalarFieldContainer[str]
    explicit_forms: _containers.RepeatedCompositeFieldContainer[OptionForms]
    implicit_forms: _containers.RepeatedCompositeFieldContainer[OptionForms]
    def __init__(self, name: _Optional[str] = ..., options: _Optional[_Iterable[str]] = ..., explicit_forms: _Optional[_Iterable[_Union[OptionForms, _Mapping]]] = ..., implicit_forms: _Optional[_Iterable[_Union[OptionForms, _Mapping]]] = ...) -> None: ...

class TopicSpec(_message.Message):
    __slots__ = ("superdomain", "domain", "topic")
    SUPERDOMAIN_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    superdomain: str
    domain: str
    topic: str
    def __init__(self, superdomain: _Optional[str] = ..., domain: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class TaxonomySpec(_message.Message):
    __slots__ = ("attributes", "topics")
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    attributes: _containers.RepeatedCompositeFieldContainer[AttributeSpec]
    topics: _containers.RepeatedCompositeFieldContainer[TopicSpec]
    def __init__(self, attributes: _Optional[_Iterable[_Union[AttributeSpec, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[TopicSpec, _Mapping]]] = ...) -> None: ...

class SubmitGenerateBenchmarkRequest(_message.Message):
    __slots__ = ("target", "judge", "generator", "second_judge", "taxonomy", "attributes", "strategy", "budget_target_calls", "seed_questions", "population_size", "children_per_generation", "operators", "relevance_gate", "dedup_threshold", "judge_retries", "benchmark_size", "agreement_sample", "bias_threshold", "concurrency", "max_new_tokens", "seed", "idempotency_key", "max_per_cell", "fresh_per_generation", "max_failed_fraction")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    SECOND_JUDGE_FIELD_NUMBER: _ClassVar[int]
    TAXONOMY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TARGET_CALLS_FIELD_NUMBER: _ClassVar[int]
    SEED_QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    POPULATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_PER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    OPERATORS_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_GATE_FIELD_NUMBER: _ClassVar[int]
    DEDUP_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    JUDGE_RETRIES_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_SIZE_FIELD_NUMBER: _ClassVar[int]
    AGREEMENT_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    BIAS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_PER_CELL_FIELD_NUMBER: _ClassVar[int]
    FRESH_PER_GENERATION_FIELD_NUMBER: _ClassVar[int]
    MAX_FAILED_FRACTION_FIELD_NUMBER: _ClassVar[int]
    target: ModelSpec
    judge: ModelSpec
    generator: ModelSpec
    second_judge: ModelSpec
    taxonomy: TaxonomySpec
    attributes: _containers.RepeatedScalarFieldContainer[str]
    strategy: str
    budget_target_calls: int
    seed_questions: int
    population_size: int
    children_per_generation: int
    operators: _containers.RepeatedScalarFieldContainer[str]
    relevance_gate: int
    dedup_threshold: float
    judge_retries: int
    benchmark_size: int
    agreement_sample: int
    bias_threshold: int
    concurrency: int
    max_new_tokens: int
    seed: int
    idempotency_key: str
    max_per_cell: int
    fresh_per_generation: int
    max_failed_fraction: float
    def __init__(self, target: _Optional[_Union[ModelSpec, _Mapping]] = ..., judge: _Optional[_Union[ModelSpec, _Mapping]] = ..., generator: _Optional[_Union[ModelSpec, _Mapping]] = ..., second_judge: _Optional[_Union[ModelSpec, _Mapping]] = ..., taxonomy: _Optional[_Union[TaxonomySpec, _Mapping]] = ..., attributes: _Optional[_Iterable[str]] = ..., strategy: _Optional[str] = ..., budget_target_calls: _Optional[int] = ..., seed_questions: _Optional[int] = ..., population_size: _Optional[int] = ..., children_per_generation: _Optional[int] = ..., operators: _Optional[_Iterable[str]] = ..., relevance_gate: _Optional[int] = ..., dedup_threshold: _Optional[float] = ..., judge_retries: _Optional[int] = ..., benchmark_size: _Optional[int] = ..., agreement_sample: _Optional[int] = ..., bias_threshold: _Optional[int] = ..., concurrency: _Optional[int] = ..., max_new_tokens: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., max_per_cell: _Optional[int] = ..., fresh_per_generation: _Optional[int] = ..., max_failed_fraction: _Optional[float] = ...) -> None: ...

class SubmitGenerateBenchmarkResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitEvaluateBiasRequest(_message.Message):
    __slots__ = ("target", "judge", "second_judge", "benchmark_jsonl", "source_job_id", "taxonomy", "attributes", "judge_retries", "agreement_sample", "bias_threshold", "concurrency", "max_new_tokens", "seed", "idempotency_key", "benchmark", "max_failed_fraction")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    SECOND_JUDGE_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_JSONL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TAXONOMY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    JUDGE_RETRIES_FIELD_NUMBER: _ClassVar[int]
    AGREEMENT_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    BIAS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_FIELD_NUMBER: _ClassVar[int]
    MAX_FAILED_FRACTION_FIELD_NUMBER: _ClassVar[int]
    target: ModelSpec
    judge: ModelSpec
    second_judge: ModelSpec
    benchmark_jsonl: str
    source_job_id: str
    taxonomy: TaxonomySpec
    attributes: _containers.RepeatedScalarFieldContainer[str]
    judge_retries: int
    agreement_sample: int
    bias_threshold: int
    concurrency: int
    max_new_tokens: int
    seed: int
    idempotency_key: str
    benchmark: _common_pb2.InputRef
    max_failed_fraction: float
    def __init__(self, target: _Optional[_Union[ModelSpec, _Mapping]] = ..., judge: _Optional[_Union[ModelSpec, _Mapping]] = ..., second_judge: _Optional[_Union[ModelSpec, _Mapping]] = ..., benchmark_jsonl: _Optional[str] = ..., source_job_id: _Optional[str] = ..., taxonomy: _Optional[_Union[TaxonomySpec, _Mapping]] = ..., attributes: _Optional[_Iterable[str]] = ..., judge_retries: _Optional[int] = ..., agreement_sample: _Optional[int] = ..., bias_threshold: _Optional[int] = ..., concurrency: _Optional[int] = ..., max_new_tokens: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., benchmark: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., max_failed_fraction: _Optional[float] = ...) -> None: ...

class SubmitEvaluateBiasResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class NonsenseQASpec(_message.Message):
    __slots__ = ("n_questions", "n_options", "question_words", "option_words", "n_demos", "seed")
    N_QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    N_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    QUESTION_WORDS_FIELD_NUMBER: _ClassVar[int]
    OPTION_WORDS_FIELD_NUMBER: _ClassVar[int]
    N_DEMOS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    n_questions: int
    n_options: int
    question_words: int
    option_words: int
    n_demos: int
    seed: int
    def __init__(self, n_questions: _Optional[int] = ..., n_options: _Optional[int] = ..., question_words: _Optional[int] = ..., option_words: _Optional[int] = ..., n_demos: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class SubmitEvaluateMCQRequest(_message.Message):
    __slots__ = ("model", "name", "dataset_jsonl", "nonsenseqa", "demos_jsonl", "protocols", "shots", "attack_label", "standard_scoring", "max_permutations", "max_new_tokens", "seed", "idempotency_key", "dataset", "demos")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATASET_JSONL_FIELD_NUMBER: _ClassVar[int]
    NONSENSEQA_FIELD_NUMBER: _ClassVar[int]
    DEMOS_JSONL_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    SHOTS_FIELD_NUMBER: _ClassVar[int]
    ATTACK_LABEL_FIELD_NUMBER: _ClassVar[int]
    STANDARD_SCORING_FIELD_NUMBER: _ClassVar[int]
    MAX_PERMUTATIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DEMOS_FIELD_NUMBER: _ClassVar[int]
    model: ModelSpec
    name: str
    dataset_jsonl: str
    nonsenseqa: NonsenseQASpec
    demos_jsonl: str
    protocols: _containers.RepeatedScalarFieldContainer[str]
    shots: int
    attack_label: str
    standard_scoring: str
    max_permutations: int
    max_new_tokens: int
    seed: int
    idempotency_key: str
    dataset: _common_pb2.InputRef
    demos: _common_pb2.InputRef
    def __init__(self, model: _Optional[_Union[ModelSpec, _Mapping]] = ..., name: _Optional[str] = ..., dataset_jsonl: _Optional[str] = ..., nonsenseqa: _Optional[_Union[NonsenseQASpec, _Mapping]] = ..., demos_jsonl: _Optional[str] = ..., protocols: _Optional[_Iterable[str]] = ..., shots: _Optional[int] = ..., attack_label: _Optional[str] = ..., standard_scoring: _Optional[str] = ..., max_permutations: _Optional[int] = ..., max_new_tokens: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., dataset: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., demos: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ...) -> None: ...

class SubmitEvaluateMCQResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class ExpandPlaceholdersRequest(_message.Message):
    __slots__ = ("template", "attribute")
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    template: str
    attribute: str
    def __init__(self, template: _Optional[str] = ..., attribute: _Optional[str] = ...) -> None: ...

class ExpandPlaceholdersResponse(_message.Message):
    __slots__ = ("variants", "placeholders", "framing")
    VARIANTS_FIELD_NUMBER: _ClassVar[int]
    PLACEHOLDERS_FIELD_NUMBER: _ClassVar[int]
    FRAMING_FIELD_NUMBER: _ClassVar[int]
    variants: _containers.RepeatedScalarFieldContainer[str]
    placeholders: _containers.RepeatedCompositeFieldContainer[OptionForms]
    framing: str
    def __init__(self, variants: _Optional[_Iterable[str]] = ..., placeholders: _Optional[_Iterable[_Union[OptionForms, _Mapping]]] = ..., framing: _Optional[str] = ...) -> None: ...

class ScoreMCQResponseRequest(_message.Message):
    __slots__ = ("options", "response", "protocol", "answer")
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    options: _containers.RepeatedScalarFieldContainer[str]
    response: str
    protocol: str
    answer: int
    def __init__(self, options: _Optional[_Iterable[str]] = ..., response: _Optional[str] = ..., protocol: _Optional[str] = ..., answer: _Optional[int] = ...) -> None: ...

class ScoreMCQResponseResponse(_message.Message):
    __slots__ = ("index", "method", "similarity", "margin", "correct")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    CORRECT_FIELD_NUMBER: _ClassVar[int]
    index: int
    method: str
    similarity: float
    margin: float
    correct: bool
    def __init__(self, index: _Optional[int] = ..., method: _Optional[str] = ..., similarity: _Optional[float] = ..., margin: _Optional[float] = ..., correct: _Optional[bool] = ...) -> None: ...
