"""OpsService: the thin gRPC edge of the diagnostic service.

SubmitDigest is one line (`ServiceRuntime.submit` validates, applies quotas, writes the job).
ComputeDigest is the sync-RPC pattern: validate the request against the kind's parameter
model (`request_params` -> pydantic -> `violations_from_pydantic`, INVALID_ARGUMENT naming each
field), refuse what is too big to answer inline (`InvalidArgument`), compute off the event loop
(`asyncio.to_thread`), and let `@rpc_method` turn the platform's errors into statuses.
"""
from __future__ import annotations

import asyncio

from paperworks.ops.v1 import ops_pb2, ops_pb2_grpc
from paperworks.services.ops.digest import digest_chain
from paperworks.shared.errors import DeadlineExceeded, InvalidArgument, violations_from_pydantic
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from pydantic import ValidationError

INLINE_MAX_STEPS = 100
INLINE_MAX_ROUNDS = 100_000


class OpsServicer(ops_pb2_grpc.OpsServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt

    @rpc_method
    async def SubmitDigest(self, request, context):
        return ops_pb2.SubmitDigestResponse(job=await self.rt.submit(context, "digest", request))

    @rpc_method
    async def ComputeDigest(self, request, context):
        self.rt.tenant(context)
        try:
            params = self.rt.spec.kinds["digest"].params.model_validate(request_params(request))
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        if params.steps > INLINE_MAX_STEPS:
            raise InvalidArgument("steps", f"at most {INLINE_MAX_STEPS} inline; submit a job")
        if params.rounds_per_step > INLINE_MAX_ROUNDS:
            raise InvalidArgument(
                "rounds_per_step", f"at most {INLINE_MAX_ROUNDS} inline; submit a job"
            )

        def check_deadline(_step, _state):
            remaining = context.time_remaining()
            if remaining is not None and remaining <= 0:
                raise DeadlineExceeded("deadline passed before the chain finished")

        checkpoints = await asyncio.to_thread(
            digest_chain, params.seed, params.steps, params.rounds_per_step, check_deadline
        )
        return ops_pb2.ComputeDigestResponse(digest=checkpoints[-1], checkpoints=checkpoints)
