"""The training service as the platform sees it: Cornstarch's frozen-aware pipeline planning, real
multi-process training on torch.distributed, and the schedule simulator.

Import-light (pydantic only). A request field whose zero is not its default is `optional` in the
proto: left unset, it is omitted and the default below applies (an explicit 0 is validated).
"""

from typing import Annotated, Literal

from paperworks.shared.backends.spec import ModelSpec
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, field_validator, model_validator

Seed = Annotated[int, Field(default=0, ge=0, le=2**63 - 1)]
Pattern = Literal["all_trainable", "frozen_encoder", "projector_only", "frozen_llm_lora"]
Method = Literal["frozen_aware", "parameters", "layers", "forward3x"]
MAX_CANDIDATES = 50_000  # partitions the planner enumerates (plan_parallelism, train)
INLINE_MAX_CANDIDATES = 500  # for the sync Plan RPC
TRAIN_MAX_WORLD = 4  # worker processes a train job starts


class HFModelSpec(ModelSpec):
    """A Hugging Face model folder (kind hf): `source` (an upload of the folder as an archive, a job's
    artifact, an s3:// object or a server path) or `path`. Safetensors weights, no remote code."""

    kind: Literal["hf"]


class EncoderDesc(BaseModel):
    """An encoder defined by its sizes, or `hf`: a Hugging Face vision encoder folder
    (CLIPVisionModel, SiglipVisionModel, or the vision tower of a CLIPModel / SiglipModel folder),
    whose config then gives tokens, d_model and layers (input_dim is unused: inputs are images)."""

    name: str = Field(default="vision", pattern=r"^[a-z][a-z0-9_]{0,15}$")
    tokens: int = Field(default=32, ge=1, le=512)
    input_dim: int = Field(default=48, ge=1, le=512)
    d_model: int = Field(default=64, ge=8, le=256)
    layers: int = Field(default=4, ge=0, le=16)
    hf: HFModelSpec | None = None


class ModelDesc(BaseModel):
    """The composed model. `llm`: a Hugging Face decoder LM folder (LlamaForCausalLM,
    Qwen2ForCausalLM) whose config then gives d_model, llm_layers and heads; `vocab` then bounds the
    synthetic task's text ids (at most the LM's vocabulary)."""

    encoders: list[EncoderDesc] = Field(default_factory=lambda: [EncoderDesc()], max_length=3)
    d_model: int = Field(default=64, ge=8, le=256)
    llm_layers: int = Field(default=6, ge=1, le=16)
    heads: int = Field(default=4, ge=1, le=8)
    vocab: int = Field(default=32, ge=4, le=1024)
    text_tokens: int = Field(default=32, ge=2, le=512)
    llm: HFModelSpec | None = None

    @field_validator("encoders", mode="before")
    @classmethod
    def _empty_means_default(cls, value):
        return value or [EncoderDesc()]

    @model_validator(mode="after")
    def consistent(self):
        names = [e.name for e in self.encoders]
        if len(set(names)) != len(names) or "llm" in names:
            raise ValueError("encoders: names must be distinct and not 'llm'")
        sized = [] if self.llm else [self.d_model]  # a Hugging Face module brings its own heads
        for d in sized + [e.d_model for e in self.encoders if e.hf is None]:
            if d % self.heads:
                raise ValueError(f"heads ({self.heads}) must divide every d_model ({d})")
        return self

    def uses_hf(self) -> bool:
        return self.llm is not None or any(e.hf is not None for e in self.encoders)

    def layers(self) -> dict[str, int]:
        """Pipeline layers per module (encoder: embed + blocks + projector; LLM: embed + blocks + head);
        a Hugging Face module's count is known once its folder is read (`MLLMConfig.modules`)."""
        return {**{e.name: e.layers + 2 for e in self.encoders}, "llm": self.llm_layers + 2}


class SequenceStats(BaseModel):
    seq_len: int = Field(default=8192, ge=256, le=65536)
    modalities: int = Field(default=2, ge=1, le=2)
    samples: int = Field(default=8, ge=1, le=64)
    seed: Seed = 0
    causal_only: bool = False


class _Pipeline(BaseModel):
    model: ModelDesc = Field(default_factory=ModelDesc)
    pattern: Pattern = "frozen_encoder"
    microbatches: int = Field(default=4, ge=1, le=64)
    batch_size: int = Field(default=8, ge=1, le=256)

    @model_validator(mode="after")
    def divisible(self):
        if self.batch_size % self.microbatches:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be divisible by microbatches ({self.microbatches})"
            )
        if getattr(self, "world_size", 1) > sum(self.model.layers().values()) and not self.model.uses_hf():
            raise ValueError("world_size exceeds the model's layers")
        if getattr(self, "world_size", 1) < len(self.model.encoders) + 1 and len(self.model.encoders) > 1:
            raise ValueError("world_size: several encoders need a stage each plus one for the LLM")
        return self


class PlanParallelismParams(_Pipeline):
    world_size: int = Field(default=2, ge=1, le=8)
    cp_size: int = Field(default=2, ge=1, le=8)
    sequence: SequenceStats = Field(default_factory=SequenceStats)
    memory_limit_mb: float = Field(default=0.0, ge=0.0, le=1e9)
    profile_repeats: int = Field(default=5, ge=1, le=50)

    @model_validator(mode="after")
    def cp_fits(self):
        if self.sequence.seq_len < 128 * self.cp_size:
            raise ValueError(f"sequence.seq_len must be at least 128 * cp_size ({128 * self.cp_size})")
        return self


class TrainParams(_Pipeline):
    world_size: int = Field(default=2, ge=1, le=TRAIN_MAX_WORLD)
    method: Method = "frozen_aware"
    steps: int = Field(default=20, ge=1, le=1000)
    learning_rate: float = Field(default=3e-3, gt=0.0, le=1.0)
    seed: Seed = 0
    plan_job_id: str = Field(default="", max_length=128)


class SimStage(BaseModel):
    forward: float = Field(ge=0.0, le=1e6)
    backward: float = Field(ge=0.0, le=1e6)
    next: int = Field(default=-1, ge=-1, le=63)


class SimulateParams(BaseModel):
    stages: list[SimStage] = Field(default_factory=list, max_length=64)
    plan_job_id: str = Field(default="", max_length=128)
    microbatches: int = Field(default=8, ge=1, le=256)
    comm_latency: float = Field(default=0.0, ge=0.0, le=1e3)

    @model_validator(mode="after")
    def one_source(self):
        if bool(self.stages) == bool(self.plan_job_id):
            raise ValueError("set exactly one of stages and plan_job_id")
        last = [i for i, s in enumerate(self.stages) if s.next == -1]
        if self.stages and last != [len(self.stages) - 1]:
            raise ValueError("stages: exactly the last stage has next = -1")
        for i, s in enumerate(self.stages[:-1]):
            if s.next <= i or s.next >= len(self.stages):
                raise ValueError(f"stages[{i}].next must name a later stage")
        return self


class PlanParams(_Pipeline):
    world_size: int = Field(default=2, ge=1, le=8)


def _kind(name, params, rpc, description, result):
    return JobKind(
        name=name,
        params=params,
        handler=f"paperworks.services.training.tasks:run_{name}",
        submit_rpc=rpc,
        description=description,
        result=result,
    )


SPEC = ServiceSpec(
    name="training",
    description="Cornstarch (ICML 2026): frozen-aware pipeline and workload-balanced context parallelism "
    "for multimodal LLM training on torch.distributed.",
    servicer="paperworks.services.training.servicer:TrainingServicer",
    grpc_module="paperworks.training.v1.training_pb2_grpc",
    grpc_service="TrainingService",
    port=50061,  # host port in Compose (services/README.md step 10); never changes
    kinds={
        "plan_parallelism": _kind(
            "plan_parallelism",
            PlanParallelismParams,
            "SubmitPlanParallelism",
            "model + freezing pattern + world size + sequence statistics -> profiled stage templates, "
            "CP mode, predicted iteration time and memory per stage",
            {
                "stages": "frozen-aware stage templates (layers, next, forward/backward s, memory bytes)",
                "predicted_iteration_time": "simulated 1F1B iteration (s)",
                "baselines": "predicted iteration time of each frozen-unaware partition (s)",
                "cp_mode": "the split with the lowest mean imbalance",
                "cp_imbalance": "max/mean per mode",
            },
        ),
        "train": _kind(
            "train",
            TrainParams,
            "SubmitTrain",
            "runs the plan's 1F1B schedule on world_size worker processes (torch.distributed: gloo on "
            "CPU, NCCL on CUDA) -> trained model (model.safetensors, announced)",
            {
                "losses": "training loss per step",
                "measured_iteration_time": "median (s)",
                "predicted_iteration_time": "simulator (s)",
                "tokens_per_s": "tokens per second at the median iteration",
                "stage_busy_s": "each stage's compute time in the last iteration (s)",
                "stage_bubble_s": "each stage's idle time in the last iteration (s)",
                "device": "where the ranks ran",
                "stages": "the plan run",
            },
        ),
        "simulate": _kind(
            "simulate",
            SimulateParams,
            "SubmitSimulate",
            "the multimodal 1F1B schedule simulated for given stage costs or a plan job",
            {"iteration_time": "predicted (s)", "bubble": "idle fraction per stage"},
        ),
    },
)
