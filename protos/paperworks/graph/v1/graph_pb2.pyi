from paperworks.v1 import common_pb2 as _common_pb2
from paperworks.v1 import jobs_pb2 as _jobs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SyntheticGraph(_message.Message):
    __slots__ = ("family", "seed")
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    family: str
    seed: int
    def __init__(self, family: _Optional[str] = ..., seed: _Optional[int] = ...) -> None: ...

class GraphSource(_message.Message):
    __slots__ = ("bundled", "synthetic", "file")
    BUNDLED_FIELD_NUMBER: _ClassVar[int]
    SYNTHETIC_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    bundled: str
    synthetic: SyntheticGraph
    file: _common_pb2.InputRef
    def __init__(self, bundled: _Optional[str] = ..., synthetic: _Optional[_Union[SyntheticGraph, _Mapping]] = ..., file: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ...) -> None: ...

class SubmitTrainGeneratorRequest(_message.Message):
    __slots__ = ("arm", "steps", "learning_rate", "rank", "hidden", "train_graphs", "validation_graphs", "lm_steps", "lm", "targets", "seed", "idempotency_key")
    ARM_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    TRAIN_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    LM_STEPS_FIELD_NUMBER: _ClassVar[int]
    LM_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    arm: str
    steps: int
    learning_rate: float
    rank: int
    hidden: int
    train_graphs: int
    validation_graphs: int
    lm_steps: int
    lm: _common_pb2.InputRef
    targets: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    idempotency_key: str
    def __init__(self, arm: _Optional[str] = ..., steps: _Optional[int] = ..., learning_rate: _Optional[float] = ..., rank: _Optional[int] = ..., hidden: _Optional[int] = ..., train_graphs: _Optional[int] = ..., validation_graphs: _Optional[int] = ..., lm_steps: _Optional[int] = ..., lm: _Optional[_Union[_common_pb2.InputRef, _Mapping]] = ..., targets: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitTrainGeneratorResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitGenerateAdapterRequest(_message.Message):
    __slots__ = ("generator_job_id", "graph", "idempotency_key")
    GENERATOR_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    generator_job_id: str
    graph: GraphSource
    idempotency_key: str
    def __init__(self, generator_job_id: _Optional[str] = ..., graph: _Optional[_Union[GraphSource, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitGenerateAdapterResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class SubmitEvaluateRequest(_message.Message):
    __slots__ = ("generator_job_ids", "families", "graphs_per_family", "queries_per_graph", "seed", "idempotency_key")
    GENERATOR_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    FAMILIES_FIELD_NUMBER: _ClassVar[int]
    GRAPHS_PER_FAMILY_FIELD_NUMBER: _ClassVar[int]
    QUERIES_PER_GRAPH_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    generator_job_ids: _containers.RepeatedScalarFieldContainer[str]
    families: _containers.RepeatedScalarFieldContainer[str]
    graphs_per_family: int
    queries_per_graph: int
    seed: int
    idempotency_key: str
    def __init__(self, generator_job_ids: _Optional[_Iterable[str]] = ..., families: _Optional[_Iterable[str]] = ..., graphs_per_family: _Optional[int] = ..., queries_per_graph: _Optional[int] = ..., seed: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SubmitEvaluateResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _jobs_pb2.Job
    def __init__(self, job: _Optional[_Union[_jobs_pb2.Job, _Mapping]] = ...) -> None: ...

class AnswerRequest(_message.Message):
    __slots__ = ("generator_job_id", "graph", "node", "seed")
    GENERATOR_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    generator_job_id: str
    graph: GraphSource
    node: str
    seed: int
    def __init__(self, generator_job_id: _Optional[str] = ..., graph: _Optional[_Union[GraphSource, _Mapping]] = ..., node: _Optional[str] = ..., seed: _Optional[int] = ...) -> None: ...

class AnswerResponse(_message.Message):
    __slots__ = ("answer", "options", "probabilities", "prompt", "graph_digest")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DIGEST_FIELD_NUMBER: _ClassVar[int]
    answer: str
    options: _containers.RepeatedScalarFieldContainer[str]
    probabilities: _containers.RepeatedScalarFieldContainer[float]
    prompt: str
    graph_digest: str
    def __init__(self, answer: _Optional[str] = ..., options: _Optional[_Iterable[str]] = ..., probabilities: _Optional[_Iterable[float]] = ..., prompt: _Optional[str] = ..., graph_digest: _Optional[str] = ...) -> None: ...
