"""The quantizer service as the platform sees it: Quantize and Evaluate jobs.

Import-light (pydantic only). A 0 or an empty value in a request means the documented default,
as proto3 cannot tell them apart.
"""

from typing import Annotated, Literal

from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, BeforeValidator, Field, model_validator

METHODS = ("rabit", "lcqat", "independent", "scalar_qat", "rtn")


def _default(value):
    return BeforeValidator(lambda v: value if v in (0, 0.0, "0", "", None) else v)


Seed = Annotated[int, Field(default=0, ge=0, le=2**63 - 1)]


class ModelSource(BaseModel):
    kind: Literal["tiny", "hf"]
    path: str = Field(min_length=1, max_length=4096)


class StdlibText(BaseModel):
    files: Annotated[int, _default(60), Field(ge=1, le=2000)] = 60
    max_chars: Annotated[int, _default(8000), Field(ge=100, le=1_000_000)] = 8000
    seed: Seed = 0


class TextSource(BaseModel):
    path: str = Field(default="", max_length=4096)
    stdlib: StdlibText | None = None

    @model_validator(mode="after")
    def one_source(self):
        if bool(self.path) == (self.stdlib is not None):
            raise ValueError("set exactly one of path and stdlib")
        return self


class QuantizeParams(BaseModel):
    model: ModelSource
    method: Literal[METHODS]
    bits: Annotated[Literal[2], _default(2)] = 2
    data: TextSource
    token_budget: int = Field(default=0, ge=0, le=10**10)
    calibration_windows: Annotated[int, _default(16), Field(ge=1, le=1024)] = 16
    seq_len: Annotated[int, _default(64), Field(ge=8, le=4096)] = 64
    batch_size: Annotated[int, _default(8), Field(ge=1, le=256)] = 8
    learning_rate: Annotated[float, _default(3e-4), Field(gt=0.0, le=1.0)] = 3e-4
    hidden_weight: float = Field(default=1.0, ge=0.0, le=100.0)
    init_sweeps: Annotated[int, _default(50), Field(ge=1, le=200)] = 50
    greedy_init: bool = False
    block_steps: int = Field(default=30, ge=0, le=10_000)
    block_latent_lr: float = Field(default=0.0, ge=0.0, le=1.0)
    e2e_steps: int = Field(default=0, ge=0, le=10_000)
    e2e_latent_lr: float = Field(default=0.0, ge=0.0, le=1.0)
    group_size: Annotated[int, _default(64), Field(ge=4, le=4096, multiple_of=4)] = 64
    seed: Seed = 0


class EvaluateParams(BaseModel):
    quantize_job_id: str = Field(min_length=1, max_length=128)
    data: TextSource
    windows: Annotated[int, _default(64), Field(ge=1, le=4096)] = 64
    seq_len: Annotated[int, _default(64), Field(ge=8, le=4096)] = 64


SPEC = ServiceSpec(
    name="quantizer",
    description="2-bit LLM quantization: RaBiT residual binarization (arXiv 2602.05367) and LC-QAT "
    "linear-constrained vector QAT (arXiv 2606.10531), served on packed kernels.",
    servicer="paperworks.services.quantizer.servicer:QuantizerServicer",
    model_loader="paperworks.services.quantizer.sources:announced_model",
    grpc_module="paperworks.quantizer.v1.quantizer_pb2_grpc",
    grpc_service="QuantizerService",
    kinds={
        "quantize": JobKind(
            name="quantize",
            params=QuantizeParams,
            handler="paperworks.services.quantizer.tasks:run_quantize",
            submit_rpc="SubmitQuantize",
            description="causal LM + text -> packed 2-bit checkpoint (safetensors + manifest)",
        ),
        "evaluate": JobKind(
            name="evaluate",
            params=EvaluateParams,
            handler="paperworks.services.quantizer.tasks:run_evaluate",
            submit_rpc="SubmitEvaluate",
            description="quantized model + text -> perplexity, bits per byte, per-layer diagnostics",
        ),
    },
)
