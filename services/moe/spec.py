"""The moe service as the platform sees it: sparse upcycling and router-loss training of small MoEs
(DPSL, arXiv 2510.01185, with its peers), routing evaluation, and SkillNet skill policies.

Import-light (pydantic only). A request field whose zero is not its default is `optional` in the
proto: left unset, it is omitted and the default below applies (an explicit 0 is validated).
"""

from typing import Annotated, Literal

from paperworks.shared.backends.spec import ModelSpec
from paperworks.shared.inputs import InputRefParams
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, field_validator, model_validator

Seed = Annotated[int, Field(default=0, ge=0, le=2**63 - 1)]
JobId = Annotated[str, Field(min_length=1, max_length=128)]
Concentration = Annotated[float, Field(gt=0.0, le=1000.0)]
MOE_KINDS = ("upcycle", "train_moe")  # the kinds whose model.safetensors is an MoE
POLICY_KINDS = ("train_skill_policy",)
MAX_EXPERTS = 64


class WorldParams(BaseModel):
    seed: Seed = 0
    d_in: int = Field(default=16, ge=2, le=256)
    classes: int = Field(default=4, ge=2, le=64)
    length: int = Field(default=8, ge=1, le=64)
    noise: float = Field(default=1.5, gt=0.0, le=10.0)


class HFModelSpec(ModelSpec):
    """A dense transformers causal LM folder to upcycle (kind hf): `source` (an upload of the folder
    as an archive, a moe job's artifact, an s3:// object or a server path) or `path`."""

    kind: Literal["hf"]


class UpcycleParams(BaseModel):
    dense: InputRefParams | None = None
    base: HFModelSpec | None = None
    world: WorldParams = Field(default_factory=WorldParams)
    d_model: int = Field(default=32, ge=8, le=256)
    heads: int = Field(default=4, ge=1, le=16)
    d_ff: int = Field(default=64, ge=8, le=1024)
    layers: int = Field(default=2, ge=1, le=8)
    dense_steps: int = Field(default=300, ge=1, le=100_000)
    batch_size: int = Field(default=64, ge=1, le=4096)
    learning_rate: float = Field(default=3e-3, gt=0.0, le=1.0)
    experts: int = Field(default=4, ge=2, le=MAX_EXPERTS)
    top_k: int = Field(default=2, ge=1, le=MAX_EXPERTS)
    init: Literal["copy", "drop_upcycle"] = "copy"
    drop_ratio: float = Field(default=0.5, ge=0.0, le=1.0)
    seed: Seed = 0

    @model_validator(mode="after")
    def consistent(self):
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be at most experts ({self.experts})")
        if self.base is not None and self.dense is not None:
            raise ValueError("set one of base (a Hugging Face model) and dense (a TokenClassifier)")
        if self.d_model % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide d_model ({self.d_model})")
        return self


class AlphaParams(BaseModel):
    alpha: list[Concentration] = Field(min_length=2, max_length=MAX_EXPERTS)


class RouterTermParams(BaseModel):
    type: Literal["dpsl", "load_balance", "z_loss", "aux_free_bias"]
    weight: float = Field(default=1.0, ge=0.0, le=1000.0)
    alpha: list[Concentration] = Field(default=[1.0], max_length=MAX_EXPERTS)
    per_modality: list[AlphaParams] = Field(default=[], max_length=2)
    warmup_steps: int = Field(default=0, ge=0, le=100_000)
    rate: float = Field(default=1e-3, gt=0.0, le=1.0)

    @field_validator("alpha", mode="before")
    @classmethod
    def _empty_means_default(cls, value):
        return value or [1.0]

    @model_validator(mode="after")
    def consistent(self):
        if self.per_modality:
            if self.type != "dpsl":
                raise ValueError("per_modality applies to dpsl terms only")
            if len(self.per_modality) != 2:
                raise ValueError("per_modality: one prior for each of the 2 modalities")
            if len({len(a.alpha) for a in self.per_modality}) != 1:
                raise ValueError("per_modality: every prior needs the same number of experts")
        return self


class TrainMoEParams(BaseModel):
    model_job_id: JobId
    router_losses: list[RouterTermParams] = Field(default=[], max_length=8)
    steps: int = Field(default=200, ge=1, le=100_000)
    batch_size: int = Field(default=64, ge=1, le=4096)
    learning_rate: float = Field(default=1e-3, gt=0.0, le=1.0)
    router_learning_rate: float = Field(default=1e-2, gt=0.0, le=1.0)
    eval_sequences: int = Field(default=2000, ge=10, le=100_000)
    seed: Seed = 0
    # a Hugging Face MoE (an upcycle with a `base`): its routers train on next-token prediction of
    # `text` (a UTF-8 file; unset: the interpreter's standard-library sources) in seq_len windows
    text: InputRefParams | None = None
    seq_len: int = Field(default=64, ge=8, le=2048)


class EvaluateRoutingParams(BaseModel):
    model_job_id: JobId
    sequences: int = Field(default=2000, ge=10, le=100_000)
    modality_share: float = Field(default=0.5, ge=0.0, le=1.0)
    alpha: list[Concentration] = Field(default=[1.0], max_length=MAX_EXPERTS)
    seed: Seed = 0

    @field_validator("alpha", mode="before")
    @classmethod
    def _empty_means_default(cls, value):
        return value or [1.0]


class TrainSkillPolicyParams(BaseModel):
    arm: Literal["skillnet", "dense", "token_moe", "random_verb_moe"] = "skillnet"
    head: Literal["flow", "mse"] = "flow"
    demos_per_task: int = Field(default=40, ge=1, le=10_000)
    steps: int = Field(default=400, ge=1, le=100_000)
    batch_size: int = Field(default=128, ge=1, le=4096)
    learning_rate: float = Field(default=1e-3, gt=0.0, le=1.0)
    seed: Seed = 0


class EvaluateSkillsParams(BaseModel):
    model_job_id: JobId
    episodes_per_task: int = Field(default=10, ge=1, le=1000)
    max_steps: int = Field(default=90, ge=1, le=1000)
    seed: Seed = 0


def _kind(name, params, rpc, description, result):
    return JobKind(
        name=name,
        params=params,
        handler=f"paperworks.services.moe.tasks:run_{name}",
        submit_rpc=rpc,
        description=description,
        result=result,
    )


_ROUTING = {
    "accuracy": "held-out task accuracy (fraction)",
    "confidence": "mean max routing probability, layers' mean (0..1)",
    "entropy": "mean routing entropy, layers' mean (nats)",
    "max_mean_load": "max / mean expert load, layers' mean (1 = balanced)",
    "mutual_information": "I(modality; top-1 expert), layers' mean (bits)",
    "modality_entropy": "H(modality) of the evaluated tokens (bits)",
    "layers": "per layer: load, expert_confidence, mean_probability, cvm per expert, and the above",
}

SPEC = ServiceSpec(
    name="moe",
    description="Sparse upcycling with DPSL router shaping (arXiv 2510.01185) and SkillNet "
    "skill-hierarchy MoE policies, on small models trained on generated data.",
    servicer="paperworks.services.moe.servicer:MoeServicer",
    # an upcycle job with a `base` announces a Hugging Face MoE (model.tar) other services load
    model_loader="paperworks.services.moe.hf_model:announced_model",
    grpc_module="paperworks.moe.v1.moe_pb2_grpc",
    grpc_service="MoeService",
    port=50060,  # host port in Compose (services/README.md step 10); never changes
    kernel_ops=("beta_cdf_pdf",),  # DPSL's Beta CDF (its gradient is the PDF)
    kinds={
        "upcycle": _kind(
            "upcycle",
            UpcycleParams,
            "SubmitUpcycle",
            "dense model (trained on the synthetic stream, given, or a Hugging Face `base`) -> E experts "
            "+ router (announced)",
            {
                "dense_accuracy": "held-out accuracy of the dense model (fraction; TokenClassifier)",
                "upcycled_accuracy": "held-out accuracy right after upcycling (fraction; TokenClassifier)",
                "experts": "experts per layer (count)",
                "top_k": "experts per token (count)",
                "parameters": "MoE parameters (count)",
                "dense_parameters": "the base's parameters (count; base only)",
                "model_type": "the MoE's transformers model_type, e.g. mixtral (base only)",
                "max_logit_difference": "max |logit| difference MoE vs base on 4 seeded random token "
                "sequences (0 up to float error for copy init; base only)",
                "mean_kl": "mean KL(base || MoE) per token on those sequences (nats; base only)",
            },
        ),
        "train_moe": _kind(
            "train_moe",
            TrainMoEParams,
            "SubmitTrainMoe",
            "MoE + router-loss mix (dpsl, load_balance, z_loss, aux_free_bias) -> trained MoE (announced); "
            "a Hugging Face MoE: its routers only, on text",
            {
                "final_task_loss": "mean task loss of the last 10% of steps (nats)",
                **_ROUTING,
                "held_out_loss": "next-token loss on held-out text windows (nats; Hugging Face MoEs)",
            },
        ),
        "evaluate_routing": _kind(
            "evaluate_routing",
            EvaluateRoutingParams,
            "SubmitEvaluateRouting",
            "MoE -> per-expert routing metrics and histograms (PNG)",
            {"sequences": "evaluated sequences (count)", **_ROUTING},
        ),
        "train_skill_policy": _kind(
            "train_skill_policy",
            TrainSkillPolicyParams,
            "SubmitTrainSkillPolicy",
            "scripted demonstrations -> SkillNet (or baseline) action-chunk policy (announced)",
            {"arm": "the policy architecture", "final_loss": "mean action loss, last 10% of logged steps"},
        ),
        "evaluate_skills": _kind(
            "evaluate_skills",
            EvaluateSkillsParams,
            "SubmitEvaluateSkills",
            "policy -> rollouts on every task: success per task, a rendered rollout strip (PNG)",
            {
                "success": "mean success over tasks (fraction)",
                "first_subtask": "share of episodes that completed the first skill (fraction)",
                "per_task": "success per task (fraction)",
            },
        ),
    },
)
