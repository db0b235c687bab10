"""The router service as the platform sees it: its job kinds and their parameters' limits.

Field names follow router.proto, so a violation's path (e.g. `synthetic.imbalance`) names the
request field. Kept import-light (no torch): the CLI, the stack and the dispatcher read it.
A scalar whose zero is not its default is `optional` in router.proto, so an unset field takes the
default here and an explicit 0 is validated like any other value.
"""

from __future__ import annotations

import base64
from typing import Literal

from paperworks.shared.backends.spec import ModelSpec as SharedModelSpec
from paperworks.shared.inputs import InputRefParams, path_shorthand
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FAMILIES = ("add", "upper", "lookup")
MAX_LOGGED_BYTES = 16 * 1024 * 1024
WIRE_DTYPES = {"D_TYPE_FLOAT32": ("<f4", 4), "D_TYPE_FLOAT64": ("<f8", 8)}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSpec(SharedModelSpec):
    """The shared model reference with the router's defaults: a remote agent is called once per
    request (30 s, one retry), not once per job."""

    timeout_s: float = Field(default=30.0, gt=0, le=600)
    max_retries: int = Field(default=1, ge=0, le=10)


class TensorParam(Strict):
    """A `paperworks.v1.Tensor` as the request's JSON form carries it (data base64)."""

    dtype: str
    shape: list[int]
    data: str = ""

    @field_validator("shape", mode="before")
    @classmethod
    def _ints(cls, v):
        return [int(d) for d in v]  # int64 arrives as strings in proto JSON

    @model_validator(mode="after")
    def _consistent(self) -> TensorParam:
        if self.dtype not in WIRE_DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(WIRE_DTYPES)}, got {self.dtype}")
        if len(self.shape) != 2 or min(self.shape) < 1:
            raise ValueError(f"shape must be [rows, columns] with both >= 1, got {self.shape}")
        need = self.shape[0] * self.shape[1] * WIRE_DTYPES[self.dtype][1]
        have = len(base64.b64decode(self.data, validate=False))
        if have != need:
            raise ValueError(f"data holds {have} bytes; shape {self.shape} of {self.dtype} needs {need}")
        return self

    def array(self):
        import numpy as np

        dtype, _ = WIRE_DTYPES[self.dtype]
        raw = np.frombuffer(base64.b64decode(self.data), dtype=dtype)
        return raw.reshape(self.shape).astype(np.float64)


class AgentParam(Strict):
    name: str = Field(min_length=1, max_length=100)
    alpha: float = Field(default=1.0, ge=0)
    beta: float = Field(default=0.0, ge=0)
    model: ModelSpec | None = None


class SyntheticParams(Strict):
    n_experts: int = Field(default=3, ge=1, le=16)
    dim: int = Field(default=8, ge=1, le=512)
    imbalance: float = Field(ge=1, le=1000)
    spread: float = Field(default=1.0, gt=0, le=10)
    seed: int = Field(default=0, ge=0)


class TextFamiliesParams(Strict):
    imbalance: float = Field(ge=1, le=1000)
    seed: int = Field(default=0, ge=0)
    prompts_per_family: int = Field(default=300, ge=10, le=5000)


class LoggedParams(Strict):
    features: TensorParam | None = None
    texts: list[str] = Field(default_factory=list)
    errors: TensorParam
    agents: list[AgentParam] = Field(min_length=2)
    validation_fraction: float = Field(default=0.2, gt=0, lt=0.5)
    test_fraction: float = Field(default=0.2, gt=0, lt=0.5)

    @model_validator(mode="after")
    def _shapes(self) -> LoggedParams:
        if (self.features is None) == (not self.texts):
            raise ValueError("give exactly one of features or texts")
        rows = self.features.shape[0] if self.features is not None else len(self.texts)
        if self.errors.shape != [rows, len(self.agents)]:
            raise ValueError(
                f"errors must have shape [{rows}, {len(self.agents)}] (inputs x agents), "
                f"got {self.errors.shape}"
            )
        if rows < 20:
            raise ValueError(f"at least 20 logged inputs are needed, got {rows}")
        size = sum(len(t.data) for t in (self.features, self.errors) if t is not None)
        if size > MAX_LOGGED_BYTES:
            raise ValueError(f"logged tensors exceed {MAX_LOGGED_BYTES} bytes; use fewer rows")
        return self


class TrainRejectorParams(Strict):
    synthetic: SyntheticParams | None = None
    text_families: TextFamiliesParams | None = None
    logged: LoggedParams | None = None
    loss: Literal["LOSS_TWO_STAGE_CE", "LOSS_MILD", "LOSS_LOGIT_ADJUSTED_CE"]
    n_train: int = Field(default=2000, ge=20, le=200_000)
    n_validation: int = Field(default=1000, ge=20, le=200_000)
    n_test: int = Field(default=2000, ge=20, le=200_000)
    margin_scales: list[float] = Field(default_factory=list, max_length=32)
    gamma: float = Field(default=0.5, ge=0, le=2)
    hidden: int = Field(default=16, ge=0, le=1024)
    # The budget the validation curves chose for every loss alike (mild/rejector.py DEFAULT_STEPS).
    steps: int = Field(default=800, ge=1, le=20_000)
    seed: int = Field(default=0, ge=0)
    compare: bool = True
    logit_taus: list[float] = Field(default_factory=list, max_length=32)

    @field_validator("margin_scales")
    @classmethod
    def _scales(cls, v: list[float]) -> list[float]:
        if any(s < 0 or s > 50 for s in v):
            raise ValueError("margin scales must lie in [0, 50]")
        return v

    @field_validator("logit_taus")
    @classmethod
    def _taus(cls, v: list[float]) -> list[float]:
        if any(t < 0 or t > 10 for t in v):
            raise ValueError("logit-adjustment taus must lie in [0, 10]")
        return v

    @model_validator(mode="after")
    def _one_dataset(self) -> TrainRejectorParams:
        given = [n for n in ("synthetic", "text_families", "logged") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("set exactly one dataset: synthetic, text_families or logged")
        return self

    @property
    def dataset(self) -> str:
        return next(n for n in ("synthetic", "text_families", "logged") if getattr(self, n) is not None)


class TrainTinyParams(Strict):
    steps: int = Field(default=400, ge=1, le=20_000)
    seed: int = Field(default=0, ge=0)
    dim: int = Field(default=64, ge=8, le=512)
    layers: int = Field(default=2, ge=1, le=8)

    @field_validator("dim")
    @classmethod
    def _heads(cls, v: int) -> int:
        if v % 8:
            raise ValueError("must be a multiple of 8 (4 heads of even size)")
        return v


class LocalModelParams(Strict):
    model: ModelSpec | None = None
    train_tiny: TrainTinyParams | None = None
    quantize_job_id: str = Field(default="", max_length=128)  # the model a quantizer job announced

    @model_validator(mode="after")
    def _one(self) -> LocalModelParams:
        if sum((self.model is not None, self.train_tiny is not None, bool(self.quantize_job_id))) != 1:
            raise ValueError("set exactly one of model, train_tiny or quantize_job_id")
        if self.model is not None and self.model.kind == "openai":
            raise ValueError("the local model must expose hidden states: kind tiny or hf, not openai")
        return self


class TaskSuiteParams(Strict):
    families: list[Literal["add", "upper", "lookup"]] = Field(default_factory=lambda: list(FAMILIES))
    max_operand: int = Field(default=10, ge=2, le=10_000)
    max_len: int = Field(default=4, ge=1, le=16)
    lookup_keys: int = Field(default=100, ge=10, le=10_000)
    known_fraction: float = Field(default=0.6, ge=0, le=1)
    table_seed: int = Field(default=0, ge=0)
    # > 0: the local model's training lookups draw known keys ∝ 1 / rank**key_zipf (data/checkable.py).
    key_zipf: float = Field(default=0.0, ge=0, le=4)

    @field_validator("families")
    @classmethod
    def _families(cls, v: list[str]) -> list[str]:
        if not v:
            return list(FAMILIES)
        if len(set(v)) != len(v):
            raise ValueError("families must not repeat")
        return v


class RemoteParams(Strict):
    name: str = Field(min_length=1, max_length=100)
    price: float = Field(gt=0)
    accuracy: list[float] = Field(default_factory=list)
    model: ModelSpec | None = None

    @field_validator("accuracy")
    @classmethod
    def _probabilities(cls, v: list[float]) -> list[float]:
        if any(not 0 <= a <= 1 for a in v):
            raise ValueError("accuracies must lie in [0, 1]")
        return v


SCORERS = ("exact", "contains", "numeric")


class PromptRow(Strict):
    """One of a user's prompts with its reference answer (a JSONL line, or an inline row)."""

    prompt: str = Field(min_length=1, max_length=20_000)
    reference: str = Field(min_length=1, max_length=20_000)
    scorer: Literal["", "exact", "contains", "numeric"] = ""


class PromptSetParams(Strict):
    """A user's prompts and reference answers (a JSONL file, `source`, or inline `rows`): what SDR's
    traces score the local LM and the real remotes on, instead of the generated suite. `path` is
    short for `source.path` (a file on the server, under the data root)."""

    path: str = Field(default="", max_length=4096)
    source: InputRefParams | None = None
    rows: list[PromptRow] = Field(default_factory=list, max_length=100_000)
    scorer: Literal["", "exact", "contains", "numeric"] = ""
    validation_fraction: float = Field(default=0.2, gt=0, lt=0.5)
    test_fraction: float = Field(default=0.3, gt=0, lt=0.5)
    max_answer_tokens: int = Field(default=256, ge=1, le=4096)

    @model_validator(mode="before")
    @classmethod
    def _path_is_source_path(cls, data):
        return path_shorthand(data)

    @model_validator(mode="after")
    def _one_source(self) -> PromptSetParams:
        if (self.source is None) == (not self.rows):
            raise ValueError("give exactly one of source (a JSONL file: an upload, an artifact, an s3:// "
                             "object or a server path; path is short for source.path) or rows")
        return self


class TrainDeciderParams(Strict):
    local: LocalModelParams
    tasks: TaskSuiteParams = Field(default_factory=TaskSuiteParams)
    prompts: PromptSetParams | None = None
    remotes: list[RemoteParams] = Field(min_length=1, max_length=16)
    n_train: int = Field(default=1500, ge=30, le=100_000)
    n_validation: int = Field(default=600, ge=30, le=100_000)
    n_test: int = Field(default=1500, ge=30, le=100_000)
    seed: int = Field(default=0, ge=0)
    hidden: int = Field(default=16, ge=1, le=1024)
    steps: int = Field(default=300, ge=1, le=20_000)
    components: int = Field(default=4, ge=1, le=256)
    query_router_baseline: bool = True
    max_new_tokens: int = Field(default=8, ge=1, le=512)

    @model_validator(mode="after")
    def _remotes(self) -> TrainDeciderParams:
        names = [r.name for r in self.remotes]
        if len(set(names)) != len(names) or "local" in names:
            raise ValueError("remote names must be unique and not 'local'")
        # compared with the default, not by whether it was set: the worker re-validates the stored
        # parameters, which carry every default
        if self.prompts is not None and self.tasks != TaskSuiteParams():
            raise ValueError("give tasks (the generated suite) or prompts (your own), not both")
        families = 1 if self.prompts is not None else len(self.tasks.families)
        for i, r in enumerate(self.remotes):
            if r.model is None and len(r.accuracy) != families:
                raise ValueError(
                    f"remotes[{i}] ({r.name}): a simulated remote needs one accuracy per task "
                    f"family ({families}{'; your prompts are one family' if self.prompts else ''}), "
                    f"got {len(r.accuracy)}"
                )
        return self


SPEC = ServiceSpec(
    name="router",
    description="Learning to defer under expert imbalance (MILD) and Selective Deferred Routing (SDR).",
    servicer="paperworks.services.router.servicer:RouterServicer",
    grpc_module="paperworks.router.v1.router_pb2_grpc",
    grpc_service="RouterService",
    port=50054,
    kinds={
        "train_rejector": JobKind(
            name="train_rejector",
            params=TrainRejectorParams,
            handler="paperworks.services.router.tasks:run_train_rejector",
            submit_rpc="SubmitTrainRejector",
            description="logged per-agent outcomes -> a MILD / two-stage CE rejector policy + report",
            result={
                "kind": "'rejector'",
                "policy_sha256": "the policy artifact's sha256 (Route loads it by the job id)",
                "policy_loss": "the loss the policy was trained with (mild, two_stage_ce, logit_adjusted_ce)",
                "margin_scale": "MILD's margin scale s chosen on validation (0 for the other losses)",
                "tau": "the logit adjustment chosen on validation (0 unless logit_adjusted_ce)",
                "test_deferral_loss": "mean cost alpha*error+beta of the chosen agents on test (cost units)",
                "test_balanced_deferral_loss": "that mean per best agent, averaged over agents (cost units)",
                "test_system_accuracy": "1 - mean error of the chosen agents on test (fraction)",
                "test_coverage": "fraction of test inputs the base predictor keeps",
                "test_minority_recall": "fraction of the inputs the rarest best agent wins sent to it (test)",
                "baseline": "per other loss (compare=true): its test deferral losses, same splits",
            },
        ),
        "train_decider": JobKind(
            name="train_decider",
            params=TrainDeciderParams,
            handler="paperworks.services.router.tasks:run_train_decider",
            submit_rpc="SubmitTrainDecider",
            description="local LM + remote traces -> an SDR decision policy + cost-quality curves",
            result={
                "kind": "'sdr'",
                "policy_sha256": "the policy artifact's sha256 (Route loads it by the job id)",
                "areas": "per policy: normalised area under its test cost-quality hull (0..1, higher better)",
                "accept_auroc": "per feature set: AUROC of 'the local answer is right' on test (0..1)",
                "accept_selection": "per baseline feature set: the setting validation chose",
                "local_quality": "mean quality of the local answers on test (fraction right)",
                "best_quality": "mean test quality of the remote best on training (fraction right)",
                "default_lambda": "the cost weight Route uses when a request names none (quality per price)",
            },
        ),
    },
)
