"""TrainingService: the thin gRPC edge. Submit* hand jobs to the runtime (a plan_job_id must name
this tenant's SUCCEEDED plan_parallelism job, checked at submit); Plan answers a small plan inline
from the analytic FLOP-count cost model (no profiling), its search bounded by
`INLINE_MAX_CANDIDATES` partitions so it answers within the fuzz deadline."""

from __future__ import annotations

import asyncio

from paperworks.services.training import data
from paperworks.services.training.cornstarch import costs, partition
from paperworks.services.training.cornstarch.model import MLLM, Freeze
from paperworks.services.training.spec import INLINE_MAX_CANDIDATES, PlanParams
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.job_refs import finished_job
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.training.v1 import training_pb2, training_pb2_grpc
from pydantic import ValidationError

INLINE_MAX_TOKENS = 256  # sequence length (text + modality tokens) a Plan RPC builds a model for


class TrainingServicer(training_pb2_grpc.TrainingServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt

    async def _check_plan(self, context, job_id: str) -> None:
        if job_id:
            tenant = self.rt.tenant(context)
            await asyncio.to_thread(
                finished_job, self.rt.store, tenant, "training", job_id, "plan_job_id", "plan_parallelism"
            )

    @rpc_method
    async def SubmitPlanParallelism(self, request, context):
        return training_pb2.SubmitPlanParallelismResponse(
            job=await self.rt.submit(context, "plan_parallelism", request)
        )

    @rpc_method
    async def SubmitTrain(self, request, context):
        await self._check_plan(context, request.plan_job_id)
        return training_pb2.SubmitTrainResponse(job=await self.rt.submit(context, "train", request))

    @rpc_method
    async def SubmitSimulate(self, request, context):
        await self._check_plan(context, request.plan_job_id)
        return training_pb2.SubmitSimulateResponse(job=await self.rt.submit(context, "simulate", request))

    @rpc_method
    async def Plan(self, request, context):
        self.rt.tenant(context)
        try:
            params = PlanParams.model_validate(request_params(request, exclude=()))
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        seq = params.model.text_tokens + sum(e.tokens for e in params.model.encoders)
        if seq > INLINE_MAX_TOKENS:
            raise InvalidArgument("model", f"{seq} tokens per sequence; at most {INLINE_MAX_TOKENS} inline")
        n = partition.count_candidates(params.model.layers(), params.world_size)
        if n > INLINE_MAX_CANDIDATES:
            raise InvalidArgument(
                "world_size",
                f"{n} candidate partitions; at most {INLINE_MAX_CANDIDATES} "
                "inline: submit a plan_parallelism job",
            )
        return await asyncio.to_thread(_plan, params)


def _plan(params) -> training_pb2.PlanResponse:
    cfg = data.config(params.model)
    model = MLLM(cfg).apply_freeze(Freeze.pattern(params.pattern, cfg.encoders))
    prof = costs.analytic(model, params.batch_size // params.microbatches)
    modules = params.model.layers()
    plans = {
        m: partition.partition(prof, modules, params.world_size, params.microbatches, m)
        for m in partition.METHODS
    }
    best = plans["frozen_aware"]
    stages = [
        training_pb2.StageTemplate(
            layers=[f"{m}:{i}" for m, i in st["layers"]],
            next=-1 if st["next"] is None else st["next"],
            forward=best["stage_forward"][s],
            backward=best["stage_backward"][s],
            memory_bytes=best["stage_memory"][s],
        )
        for s, st in enumerate(best["stages"])
    ]
    return training_pb2.PlanResponse(
        stages=stages,
        predicted_iteration_time=best["predicted_iteration_time"],
        baselines={m: p["predicted_iteration_time"] for m, p in plans.items() if m != "frozen_aware"},
    )
