"""The vlm service as the platform sees it: the small VLM, modality-following audits and steering,
and RL fine-tuning (GRPO | DAPO | CFPO | PAPO).

Import-light (pydantic only). A request field whose zero is not its default is `optional` in the
proto: left unset, it is omitted and the default below applies (an explicit 0 is validated).
"""

from typing import Annotated, Literal

from paperworks.shared.backends.spec import ModelSpec
from paperworks.shared.inputs import InputRefParams
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

Seed = Annotated[int, Field(default=0, ge=0, le=2**63 - 1)]
JobId = Annotated[str, Field(min_length=1, max_length=128)]
# the job kinds whose `model.safetensors` is a TinyVLM (a model_job_id may name any of them)
MODEL_KINDS = ("pretrain", "steer_preference", "train_rl")
HF_VLMS = "LlavaForConditionalGeneration or Qwen2VLForConditionalGeneration"
BOTH_MODELS = "set one of model_job_id (a vlm job's TinyVLM) and model (a Hugging Face VLM), not both"


class VLMModelSpec(ModelSpec):
    """A Hugging Face vision-language model folder (kind hf; `services/vlm/hf_vlm.py`): a
    LlavaForConditionalGeneration or Qwen2VLForConditionalGeneration saved with safetensors, with
    its tokenizer and image processor, from `source` (an upload of the folder as an archive, a
    job's artifact, an s3:// object or a server path) or `path`."""

    kind: Literal["hf"]


def one_model(model: VLMModelSpec | None, info: ValidationInfo) -> VLMModelSpec | None:
    """Exactly one of model_job_id (a TinyVLM job) and model (an HF folder); refusals name `model`."""
    if "model_job_id" not in info.data:  # model_job_id itself was refused
        return model
    if model is not None and info.data["model_job_id"]:
        raise ValueError(BOTH_MODELS)
    if model is None and not info.data["model_job_id"]:
        raise ValueError(f"name the model: model_job_id (a vlm job's TinyVLM) or model (a {HF_VLMS} folder)")
    return model


class PretrainParams(BaseModel):
    task: Literal["modality_mix", "shortcut_vqa"] = "modality_mix"
    # modality_mix: the share of text-only and of image-only items (the rest are consistent
    # bimodal); the skew is what gives the model its inherent modality preference
    text_fraction: float = Field(default=0.8, ge=0.0, le=1.0)
    image_fraction: float = Field(default=0.1, ge=0.0, le=1.0)
    # shortcut_vqa: how often the asked shape has its prior colour in training
    prior_strength: float = Field(default=0.8, ge=0.0, le=1.0)
    d_model: int = Field(default=32, ge=8, le=256)
    heads: int = Field(default=4, ge=1, le=16)
    vision_layers: int = Field(default=1, ge=1, le=8)
    lm_layers: int = Field(default=4, ge=1, le=12)
    steps: int = Field(default=300, ge=1, le=100_000)
    batch_size: int = Field(default=64, ge=1, le=4096)
    learning_rate: float = Field(default=3e-3, gt=0.0, le=1.0)
    seed: Seed = 0

    @model_validator(mode="after")
    def consistent(self):
        if self.text_fraction + self.image_fraction > 1.0:
            raise ValueError("text_fraction + image_fraction must be at most 1")
        if self.d_model % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide d_model ({self.d_model})")
        return self


class SyntheticGrid(BaseModel):
    seed: Seed = 0
    per_cell: int = Field(default=40, ge=1, le=2000)


class BuildConflictSetParams(SyntheticGrid):
    pass


UncertaintyIndex = Literal["entropy", "one_minus_max", "one_minus_margin"]


class AuditParams(BaseModel):
    model_job_id: str = Field(default="", max_length=128)
    model: VLMModelSpec | None = Field(default=None, validate_default=True)
    # a conflict_set.npz: a build_conflict_set job's artifact, an upload, an s3:// object or a path
    conflict_set: InputRefParams | None = None
    synthetic: SyntheticGrid | None = None
    indices: list[UncertaintyIndex] = Field(default=["entropy", "one_minus_max"], min_length=1, max_length=3)
    bins: int = Field(default=10, ge=3, le=50)
    bootstrap: int = Field(default=200, ge=10, le=5000)
    epsilon: float = Field(default=0.1, gt=0.0, le=1.0)
    seed: Seed = 0

    _one_model = field_validator("model")(one_model)

    @field_validator("indices", mode="before")
    @classmethod
    def _empty_means_default(cls, value):
        return value or ["entropy", "one_minus_max"]

    @model_validator(mode="after")
    def one_source(self):
        if (self.conflict_set is None) == (self.synthetic is None):
            raise ValueError("set exactly one of conflict_set and synthetic")
        if len(set(self.indices)) != len(self.indices):
            raise ValueError("indices: each index at most once")
        return self


def steer_refusal(audit_job_id: str, label: str | None) -> str:
    """Why an audit of a Hugging Face VLM cannot be steered (steer_preference fine-tunes TinyVLM)."""
    return (
        f"audit {audit_job_id} ran on a Hugging Face VLM ({label}); steer_preference, train_rl and "
        "train_spatial train TinyVLM models only (audit a pretrain, steer_preference or train_rl job)"
    )


class AnswerHFParams(BaseModel):
    """Answer on a Hugging Face VLM: the folder and the closed answer set (words its tokenizer
    knows; empty means the six colour words of the conflict items)."""

    model: VLMModelSpec
    options: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(default=[], max_length=64)


class SteerParams(BaseModel):
    audit_job_id: JobId
    target_modality: Literal["vision", "text"] = "vision"
    selection: Literal["boundary", "easy"] = "boundary"
    cases: int = Field(default=200, ge=1, le=100_000)
    epsilon: float = Field(default=0.1, gt=0.0, le=1.0)
    steps: int = Field(default=60, ge=1, le=100_000)
    batch_size: int = Field(default=32, ge=1, le=4096)
    learning_rate: float = Field(default=1e-3, gt=0.0, le=1.0)
    eval_per_cell: int = Field(default=40, ge=1, le=2000)
    seed: Seed = 0


class TrainRLParams(BaseModel):
    model_job_id: JobId
    algorithm: Literal["grpo", "dapo", "cfpo", "papo"] = "cfpo"
    base: Literal["grpo", "dapo"] = "grpo"
    steps: int = Field(default=100, ge=1, le=100_000)
    prompts: int = Field(default=16, ge=1, le=4096)
    group_size: int = Field(default=5, ge=2, le=64)
    learning_rate: float = Field(default=3e-4, gt=0.0, le=1.0)
    updates: int = Field(default=2, ge=1, le=16)
    # unset: the paper's value for the algorithm and base (RLConfig.preset)
    kl_beta: float | None = Field(default=None, ge=0.0, le=10.0)
    clip_high: float | None = Field(default=None, gt=0.0, le=10.0)
    gamma: float | None = Field(default=None, ge=0.0, le=10.0)
    entropy: float | None = Field(default=None, ge=0.0, le=10.0)
    prior_strength: float = Field(default=0.8, ge=0.0, le=1.0)
    eval_items: int = Field(default=300, ge=10, le=100_000)
    seed: Seed = 0


class TrainSpatialParams(BaseModel):
    """SpatioLM (arXiv 2608.01899): pre-train a base VLM on general + spatial QA from the renderer,
    then train one arm on spatial QA: `spatio` (zero-init branch + DPT head with the 3-D losses),
    `lm_only` (the branch with the LM loss only) or `finetune` (every VLM parameter, invasive)."""

    arm: Literal["spatio", "lm_only", "finetune"] = "spatio"
    frames: int = Field(default=1, ge=1, le=4)
    d_model: int = Field(default=32, ge=8, le=128)
    heads: int = Field(default=4, ge=1, le=16)
    pretrain_items: int = Field(default=2000, ge=16, le=20_000)
    pretrain_steps: int = Field(default=600, ge=1, le=100_000)
    items: int = Field(default=1500, ge=16, le=20_000)
    steps: int = Field(default=250, ge=1, le=100_000)
    batch_size: int = Field(default=64, ge=1, le=1024)
    pretrain_learning_rate: float = Field(default=3e-3, gt=0.0, le=1.0)
    learning_rate: float = Field(default=1e-3, gt=0.0, le=1.0)
    seed: Seed = 0

    @model_validator(mode="after")
    def consistent(self):
        if self.d_model % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide d_model ({self.d_model})")
        return self


class EvaluateSpatialParams(BaseModel):
    model_job_id: JobId  # a SUCCEEDED train_spatial job
    items: int = Field(default=400, ge=10, le=20_000)
    seed: Seed = 0


def _kind(name, params, rpc, description, result):
    return JobKind(
        name=name,
        params=params,
        handler=f"paperworks.services.vlm.tasks:run_{name}",
        submit_rpc=rpc,
        description=description,
        result=result,
    )


SPEC = ServiceSpec(
    name="vlm",
    description="Modality following (arXiv 2511.02243), CFPO counterfactual policy optimization "
    "(arXiv 2606.23206) and the SpatioLM spatio-vision branch (arXiv 2608.01899) on small "
    "vision-language models trained on generated data.",
    servicer="paperworks.services.vlm.servicer:VlmServicer",
    grpc_module="paperworks.vlm.v1.vlm_pb2_grpc",
    grpc_service="VlmService",
    port=50058,  # host port in Compose (services/README.md step 10); never changes
    kinds={
        "pretrain": _kind(
            "pretrain",
            PretrainParams,
            "SubmitPretrain",
            "generated data -> TinyVLM (model.safetensors, announced)",
            {
                "task": "modality_mix or shortcut_vqa",
                "final_loss": "mean cross-entropy of the last 10% of steps (nats)",
                "text_only_accuracy": "modality_mix: held-out text-only accuracy (fraction)",
                "image_only_accuracy": "modality_mix: held-out image-only accuracy (fraction)",
                "bimodal_accuracy": "modality_mix: held-out consistent bimodal accuracy (fraction)",
                "in_distribution_accuracy": "shortcut_vqa: accuracy on the training distribution (fraction)",
                "anti_prior_accuracy": "shortcut_vqa: accuracy where the language prior is wrong (fraction)",
                "visual_dependency": "shortcut_vqa: accuracy drop when the image is blanked (fraction)",
                "parameters": "model parameters (count)",
            },
        ),
        "build_conflict_set": _kind(
            "build_conflict_set",
            BuildConflictSetParams,
            "SubmitBuildConflictSet",
            "seed, per_cell -> conflict_set.npz over the 5 x 5 difficulty grid",
            {
                "items": "conflict items (count)",
                "cells": "difficulty cells (count)",
                "per_cell": "items per cell (count)",
            },
        ),
        "audit_modality_following": _kind(
            "audit_modality_following",
            AuditParams,
            "SubmitAuditModalityFollowing",
            "model (a TinyVLM job or an HF VLM folder) + conflict set -> following curve, balance point"
            " + CI, TFR/VFR, oscillations",
            {
                "balance_point": "dH where P(follow text) = 0.5, first index (normalized-entropy units)",
                "ci_low": "bootstrap 2.5% of the balance point",
                "ci_high": "bootstrap 97.5% of the balance point",
                "spearman": "Spearman rho of the binned P(follow text) vs dH, first index (-1..1)",
                "spearman_p": "item-level Spearman p-value, first index",
                "balance_points": "balance point per index (that index's units)",
                "tfr": "text-following ratio (fraction of items)",
                "vfr": "vision-following ratio (fraction)",
                "oscillations_ambiguous": "mean logit-lens switches, |dH - x*| < epsilon (count)",
                "oscillations_clear": "mean logit-lens switches, |dH - x*| > 2 epsilon (count)",
                "items": "conflict items audited (count)",
            },
        ),
        "steer_preference": _kind(
            "steer_preference",
            SteerParams,
            "SubmitSteerPreference",
            "audit -> SFT on boundary (or easy) cases -> steered model (announced), held-out re-audit",
            {
                "cases": "SFT items selected (count)",
                "within_epsilon": "of them, |dH - x*| < epsilon (count)",
                "balance_point_before": "held-out balance point before SFT (entropy units)",
                "balance_point_after": "held-out balance point after SFT (entropy units)",
                "shift_toward_target": "balance-point move toward the target modality (entropy units)",
                "target_following_before": "held-out mean over grid cells of following the target (fraction)",
                "target_following_after": "the same after SFT (fraction)",
                "oscillations_before": "held-out mean logit-lens switches, ambiguous band (count)",
                "oscillations_after": "the same after SFT (count)",
            },
        ),
        "train_rl": _kind(
            "train_rl",
            TrainRLParams,
            "SubmitTrainRL",
            "model -> GRPO | DAPO | CFPO | PAPO on the shortcut VQA task -> model (announced)",
            {
                "algorithm": "grpo, dapo, cfpo or papo (with base)",
                "final_reward": "mean reward, last 10 steps (0..1)",
                "in_distribution_accuracy": "held-out accuracy, training distribution (fraction)",
                "anti_prior_accuracy": "held-out accuracy where the language prior is wrong (fraction)",
                "visual_dependency": "in-distribution accuracy drop when the image is blanked (fraction)",
                "blank_accuracy": "in-distribution accuracy with the image blanked (fraction)",
                "kl": "last step's k3 KL to the reference (nats; 0 without a reference)",
                "discrepancy": "last step's maximised k3 to the counterfactual / masked policy (nats)",
            },
        ),
        "train_spatial": _kind(
            "train_spatial",
            TrainSpatialParams,
            "SubmitTrainSpatial",
            "renderer QA -> base VLM -> SpatioLM arm (spatio | lm_only | finetune) -> model (announced)",
            {
                "arm": "spatio, lm_only or finetune",
                "final_loss": "last step's training loss of the arm (weighted sum for spatio; nats + units)",
                "spatial_accuracy": "held-out spatial QA accuracy of the arm (fraction)",
                "base_spatial_accuracy": "the frozen base's held-out spatial QA accuracy (fraction)",
                "general_accuracy": "held-out general QA accuracy of the arm (fraction)",
                "base_general_accuracy": "the frozen base's held-out general QA accuracy (fraction)",
                "trainable_parameters": "parameters the arm trains (count)",
                "parameters": "parameters of the served model, branch and head included (count)",
            },
        ),
        "evaluate_spatial": _kind(
            "evaluate_spatial",
            EvaluateSpatialParams,
            "SubmitEvaluateSpatial",
            "train_spatial model -> spatial/general QA tables vs its base, depth AbsRel, depth PNG",
            {
                "spatial_accuracy": "spatial QA accuracy (fraction)",
                "spatial_mra": "VSI-Bench mean relative accuracy on numeric spatial answers (0..1)",
                "general_accuracy": "general QA accuracy (fraction)",
                "base_spatial_accuracy": "the VLM without its branch (fraction; the base for branch arms)",
                "base_spatial_mra": "the same without the branch (0..1)",
                "base_general_accuracy": "the same without the branch (fraction)",
                "depth_abs_rel": "head depth AbsRel vs ground truth, half resolution (spatio arm only)",
                "teacher_abs_rel": "the pseudo-teacher's AbsRel vs ground truth (spatio arm; else absent)",
                "items": "questions per split (count)",
            },
        ),
    },
)
