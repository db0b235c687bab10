"""The quantizer service as the platform sees it: Quantize and Evaluate jobs.

Import-light (pydantic only). Request fields whose zero is not their default are proto3
`optional`: left unset, they take the defaults below; an explicit 0 is validated like any value.
"""

from typing import Annotated, Literal

from paperworks.shared.backends.spec import ModelSpec
from paperworks.shared.inputs import InputRefParams, path_shorthand
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field, model_validator

from .method_names import NAMES

Seed = Annotated[int, Field(default=0, ge=0, le=2**63 - 1)]


class LocalModelSpec(ModelSpec):
    """A causal LM folder: the project's `tiny` decoder or a transformers `hf` model of any family
    AutoModelForCausalLM loads, from `source` (an upload of the folder as an archive, a job's
    artifact, an s3:// object or a server path) or `path`, short for `source.path`. The quantizer
    rewrites the model's layers, so never an endpoint."""

    kind: Literal["tiny", "hf"]


class StdlibText(BaseModel):
    files: int = Field(default=60, ge=1, le=2000)
    max_chars: int = Field(default=8000, ge=100, le=1_000_000)
    seed: Seed = 0


class TextSource(BaseModel):
    """A text file or folder (`source`, or `path` short for `source.path`), or the stdlib sources."""

    path: str = Field(default="", max_length=4096)
    source: InputRefParams | None = None
    stdlib: StdlibText | None = None

    @model_validator(mode="before")
    @classmethod
    def _path_is_source_path(cls, data):
        return path_shorthand(data)

    @model_validator(mode="after")
    def one_source(self):
        if (self.source is None) == (self.stdlib is None):
            raise ValueError("set exactly one of source (or path) and stdlib")
        if self.source is not None and self.source.path:
            self.path = self.source.path
        return self


class QuantizeParams(BaseModel):
    model: LocalModelSpec
    method: Literal[NAMES]
    bits: Literal[2] = 2
    data: TextSource
    token_budget: int = Field(default=0, ge=0, le=10**10)
    calibration_windows: int = Field(default=16, ge=1, le=1024)
    seq_len: int = Field(default=64, ge=8, le=4096)
    batch_size: int = Field(default=8, ge=1, le=256)
    learning_rate: float = Field(default=3e-4, gt=0.0, le=1.0)
    hidden_weight: float = Field(default=1.0, ge=0.0, le=100.0)
    init_sweeps: int = Field(default=50, ge=1, le=200)
    greedy_init: bool = False
    block_steps: int = Field(default=30, ge=0, le=10_000)
    block_latent_lr: float = Field(default=0.0, ge=0.0, le=1.0)
    e2e_steps: int = Field(default=0, ge=0, le=10_000)
    e2e_latent_lr: float = Field(default=0.0, ge=0.0, le=1.0)
    group_size: int = Field(default=64, ge=4, le=4096, multiple_of=4)
    seed: Seed = 0


class EvaluateParams(BaseModel):
    quantize_job_id: str = Field(min_length=1, max_length=128)
    data: TextSource
    windows: int = Field(default=64, ge=1, le=4096)
    seq_len: int = Field(default=64, ge=8, le=4096)


SPEC = ServiceSpec(
    name="quantizer",
    description="2-bit LLM quantization: RaBiT residual binarization (arXiv 2602.05367) and LC-QAT "
    "linear-constrained vector QAT (arXiv 2606.10531), served on packed kernels.",
    servicer="paperworks.services.quantizer.servicer:QuantizerServicer",
    model_loader="paperworks.services.quantizer.data:announced_model",
    grpc_module="paperworks.quantizer.v1.quantizer_pb2_grpc",
    grpc_service="QuantizerService",
    port=50053,
    kernel_ops=("binary_linear", "int2_linear"),  # the lattice path runs on int2_linear
    kinds={
        "quantize": JobKind(
            name="quantize",
            params=QuantizeParams,
            handler="paperworks.services.quantizer.tasks:run_quantize",
            submit_rpc="SubmitQuantize",
            description="causal LM + text -> packed 2-bit checkpoint (safetensors + manifest)",
            result={"method": "rabit | lcqat | the baselines", "bits_per_weight": "code bits per weight",
                    "bits_per_weight_with_scales": "bits per weight counting scales and float vectors",
                    "bits_per_weight_parts": "those bits by part (codes, scales, vectors)",
                    "layers": "linear layers quantized (count)", "steps": "QAT optimizer steps (count)",
                    "tokens": "calibration + training tokens read (count)",
                    "final_loss": "last QAT distillation loss (KL, nats per token)",
                    "validation": "base and quantized perplexity and bits per byte on held-out windows",
                    "checkpoint_sha256": "the packed checkpoint artifact (announced: MODEL_READY)",
                    "manifest_sha256": "its manifest artifact",
                    "block_reconstruction_error": "LC-QAT block-wise init: relative output error"},
        ),
        "evaluate": JobKind(
            name="evaluate",
            params=EvaluateParams,
            handler="paperworks.services.quantizer.tasks:run_evaluate",
            submit_rpc="SubmitEvaluate",
            description="quantized model + text -> perplexity, bits per byte, per-layer diagnostics",
            result={"quantize_job_id": "the evaluated quantize job", "method": "its method",
                    "bits_per_weight": "code bits per weight",
                    "bits_per_weight_with_scales": "bits per weight counting scales and float vectors",
                    "base": "the float model: perplexity, bits per byte, tokens",
                    "quantized": "the packed model: perplexity, bits per byte, tokens",
                    "perplexity_ratio": "quantized / base perplexity (1 = lossless)",
                    "layer_mean": "per-layer diagnostics averaged (relative output error, ...)"},
        ),
    },
)
