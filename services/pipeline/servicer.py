"""PipelineService: the thin gRPC edge. SubmitRun validates the whole pipeline
(`validation.validate_run`: shape, DAG, services, kinds, references, and each step's parameters
asked of its own service) before `ServiceRuntime.submit` writes the job; ValidateRun does the same
and writes nothing."""
from __future__ import annotations

import asyncio

from paperworks.pipeline.v1 import pipeline_pb2, pipeline_pb2_grpc
from paperworks.services.pipeline.calls import internal_ready
from paperworks.services.pipeline.spec import RunParams
from paperworks.services.pipeline.validation import renamed_pydantic, validate_run
from paperworks.shared.errors import violations_from_pydantic
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from pydantic import ValidationError


class PipelineServicer(pipeline_pb2_grpc.PipelineServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt

    async def _validate(self, context, request):
        tenant = self.rt.tenant(context)
        internal_ready(self.rt.settings)
        try:
            params = RunParams.model_validate(request_params(request))
        except ValidationError as exc:
            raise renamed_pydantic(violations_from_pydantic(exc)) from None
        return await asyncio.to_thread(validate_run, params, tenant)

    @rpc_method
    async def SubmitRun(self, request, context):
        await self._validate(context, request)
        return pipeline_pb2.SubmitRunResponse(job=await self.rt.submit(context, "run", request))

    @rpc_method
    async def ValidateRun(self, request, context):
        dag = await self._validate(context, request)
        return pipeline_pb2.ValidateRunResponse(order=dag.order())
