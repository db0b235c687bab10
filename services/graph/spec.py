"""The graph service as the platform sees it: GaRA generator training, adapter generation for a
graph (PEFT export), zero-shot evaluation, and the Answer RPC.

Import-light (pydantic only). A request field whose zero is not its default is `optional` in the
proto: left unset, it is omitted and the default below applies.
"""

from typing import Annotated, Literal

from paperworks.shared.inputs import InputRefParams
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Seed = Annotated[int, Field(default=0, ge=0, le=2**63 - 1)]
JobId = Annotated[str, Field(min_length=1, max_length=128)]
Arm = Literal["frozen", "static_lora", "prefix", "gara_no_norm", "gara"]
Family = Literal["sbm", "barabasi_albert", "watts_strogatz"]
Bundled = Literal["karate_club", "davis_southern_women", "florentine_families", "les_miserables"]
TARGET = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class SyntheticGraph(BaseModel):
    model_config = ConfigDict(extra="forbid")
    family: Family = "sbm"
    seed: Seed = 0

    @field_validator("family", mode="before")
    @classmethod
    def _empty_means_default(cls, value):
        return value or "sbm"


class GraphSource(BaseModel):
    """Exactly one of a bundled networkx graph, a generated one, or a file (InputRef)."""

    model_config = ConfigDict(extra="forbid")
    bundled: Bundled | Literal[""] = ""
    synthetic: SyntheticGraph | None = None
    file: InputRefParams | None = None

    @model_validator(mode="after")
    def _one_source(self):
        chosen = [n for n in ("bundled", "synthetic", "file") if getattr(self, n)]
        if len(chosen) != 1:
            raise ValueError("set exactly one of bundled, synthetic and file")
        return self


class TrainGeneratorParams(BaseModel):
    arm: Arm = "gara"
    steps: int = Field(default=600, ge=1, le=100_000)
    learning_rate: float = Field(default=3e-3, gt=0.0, le=1.0)
    rank: int = Field(default=4, ge=1, le=64)
    hidden: int = Field(default=64, ge=8, le=512)
    train_graphs: int = Field(default=512, ge=8, le=100_000)
    validation_graphs: int = Field(default=32, ge=4, le=10_000)
    lm_steps: int = Field(default=200, ge=1, le=100_000)
    lm: InputRefParams | None = None
    targets: list[Annotated[str, Field(pattern=TARGET)]] = Field(default=["q_proj", "v_proj"], max_length=16)
    seed: Seed = 0

    @field_validator("targets", mode="before")
    @classmethod
    def _empty_means_default(cls, value):
        return value or ["q_proj", "v_proj"]

    @model_validator(mode="after")
    def _distinct(self):
        if len(set(self.targets)) != len(self.targets):
            raise ValueError("targets: each module name at most once")
        return self


class GenerateAdapterParams(BaseModel):
    generator_job_id: JobId
    graph: GraphSource


class EvaluateParams(BaseModel):
    generator_job_ids: list[JobId] = Field(min_length=1, max_length=8)
    families: list[Family | Literal["bundled"]] = Field(
        default=["sbm", "barabasi_albert", "watts_strogatz", "bundled"], max_length=4
    )
    graphs_per_family: int = Field(default=32, ge=1, le=1000)
    queries_per_graph: int = Field(default=16, ge=2, le=256)
    seed: Seed = 0

    @field_validator("families", mode="before")
    @classmethod
    def _empty_means_default(cls, value):
        return value or ["sbm", "barabasi_albert", "watts_strogatz", "bundled"]

    @model_validator(mode="after")
    def _distinct(self):
        if len(set(self.families)) != len(self.families):
            raise ValueError("families: each family at most once")
        if len(set(self.generator_job_ids)) != len(self.generator_job_ids):
            raise ValueError("generator_job_ids: each job at most once")
        return self


class AnswerParams(BaseModel):
    generator_job_id: JobId
    graph: GraphSource
    node: str = Field(min_length=1, max_length=256)
    seed: Seed = 0


def _kind(name, params, rpc, description, result):
    return JobKind(
        name=name,
        params=params,
        handler=f"paperworks.services.graph.tasks:run_{name}",
        submit_rpc=rpc,
        description=description,
        result=result,
    )


SPEC = ServiceSpec(
    name="graph",
    description="GaRA graph-aware LoRA generation (arXiv 2606.22429): zero-shot graph tasks on a "
    "frozen causal LM, adapters exported in PEFT format.",
    servicer="paperworks.services.graph.servicer:GraphServicer",
    grpc_module="paperworks.graph.v1.graph_pb2_grpc",
    grpc_service="GraphService",
    port=50062,  # host port in Compose (services/README.md step 10); never changes
    kinds={
        "train_generator": _kind(
            "train_generator",
            TrainGeneratorParams,
            "SubmitTrainGenerator",
            "source SBM graphs -> one arm's adapter / generator (generator.safetensors, announced)",
            {
                "arm": "gara, gara_no_norm, static_lora, prefix or frozen",
                "validation_accuracy": "best validation accuracy on held-in SBM graphs (fraction)",
                "best_step": "step whose state was kept (count)",
                "steps_run": "steps trained before early stopping (count)",
                "norm_ratio": "generated/static mean column L1 norm at the end (ratio; gara arms)",
                "trainable_parameters": "parameters the arm trains (count)",
            },
        ),
        "generate_adapter": _kind(
            "generate_adapter",
            GenerateAdapterParams,
            "SubmitGenerateAdapter",
            "generator + graph -> PEFT LoRA adapter (adapter_config.json, adapter_model.safetensors)",
            {
                "graph_digest": "sha256 of the graph's edges and node texts",
                "nodes": "nodes in the graph (count)",
                "edges": "undirected edges (count)",
                "modules": "adapted projections (count)",
                "rank": "LoRA rank (count)",
            },
        ),
        "evaluate": _kind(
            "evaluate",
            EvaluateParams,
            "SubmitEvaluate",
            "generators -> zero-shot accuracy per held-out family and arm (evaluation.json)",
            {
                "accuracy": "{arm: {family: zero-shot accuracy (fraction)}}; arm 'frozen' is the base LM",
                "queries": "queries per family (count)",
            },
        ),
    },
)
