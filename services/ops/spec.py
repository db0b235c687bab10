"""The ops service as the platform sees it: its gRPC service, its one job kind, its host port."""
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, Field


class DigestParams(BaseModel):
    seed: int = Field(ge=0, le=2**64 - 1)
    steps: int = Field(ge=1, le=10_000)
    rounds_per_step: int = Field(ge=1, le=10_000_000)
    fail_once_at_step: int = Field(default=0, ge=0)


SPEC = ServiceSpec(
    name="ops",
    description="Diagnostic: a seeded SHA-256 chain in steps (tests the job runtime).",
    servicer="paperworks.services.ops.servicer:OpsServicer",
    grpc_module="paperworks.ops.v1.ops_pb2_grpc",
    grpc_service="OpsService",
    port=50052,  # host port in Compose (services/README.md step 10); never changes
    kinds={
        "digest": JobKind(
            name="digest",
            params=DigestParams,
            handler="paperworks.services.ops.tasks:run_digest",
            submit_rpc="SubmitDigest",
            description="seed, steps, rounds_per_step → the chain's final digest",
            result={"digest": "the state after the last step (64 hex characters, sha256)",
                    "steps": "steps computed (count)"},
        )
    },
)
