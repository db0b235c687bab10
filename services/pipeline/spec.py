"""The pipeline service as the platform sees it: one job kind, `run`, whose parameters are a DAG
of steps (each a job of another service), and its host port.

Only the shape is checked here (names, sizes); the servicer checks the rest before anything is
written (`paperworks.services.pipeline.validation`): services and kinds, references, cycles, and
each step's own parameters, asked of the step's service."""
from __future__ import annotations

from typing import Any

from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_STEPS = 32
MAX_RETRIES = 5
StepName = Field(pattern=r"^[a-z][a-z0-9_-]{0,47}$")


def _integral(value: Any) -> Any:
    """JSON numbers arrive as doubles through a protobuf Struct: 40.0 is the 40 a user wrote."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


class StepParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = StepName
    service: str = Field(min_length=1, max_length=64)
    kind: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)
    after: list[str] = Field(default=[], max_length=MAX_STEPS)
    retries: int = Field(default=0, ge=0, le=MAX_RETRIES)

    @field_validator("params", mode="after")
    @classmethod
    def _numbers(cls, value: dict) -> dict:
        return _integral(value)


class RunParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[StepParams] = Field(min_length=1, max_length=MAX_STEPS)


SPEC = ServiceSpec(
    name="pipeline",
    description="Workflows across services: a DAG of jobs whose steps feed each other's outputs, "
                "advanced by the steps' events on Kafka.",
    servicer="paperworks.services.pipeline.servicer:PipelineServicer",
    grpc_module="paperworks.pipeline.v1.pipeline_pb2_grpc",
    grpc_service="PipelineService",
    port=50063,  # host port in Compose (services/README.md step 10); never changes
    kinds={
        "run": JobKind(
            name="run",
            params=RunParams,
            handler="paperworks.services.pipeline.tasks:run_run",
            submit_rpc="SubmitRun",
            description="steps (service, kind, params with references to earlier steps' outputs) -> "
                        "each step's job, run as its dependencies succeed",
            result={"order": "the steps in the order they were planned",
                    "steps": "per step: job_id, service, kind, state, attempts (jobs submitted), "
                             "outputs (result, artifacts, announced models)",
                    "succeeded": "steps that SUCCEEDED (count)"},
        )
    },
)
