"""TrainingService: the thin gRPC edge. Submit* hand jobs to the runtime (a plan_job_id must name
this tenant's SUCCEEDED plan_parallelism job, checked at submit; a Hugging Face folder given as a
server path is read at submit, any other source must name an archive); Plan answers a small plan
inline from the analytic FLOP-count cost model (no profiling; a Hugging Face module is built from
its config on the meta device, no weights read), its search bounded by `INLINE_MAX_CANDIDATES`
partitions so it answers within the fuzz deadline."""

from __future__ import annotations

import asyncio

from paperworks.services.training import data
from paperworks.services.training.cornstarch import costs, partition
from paperworks.services.training.cornstarch.model import MLLM, Freeze
from paperworks.services.training.spec import (
    INLINE_MAX_CANDIDATES,
    PlanParallelismParams,
    PlanParams,
    TrainParams,
)
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

    def _check_models(self, params_cls, request, context) -> None:
        """Hugging Face folders the worker would refuse, refused at submit (`data.check_folders`);
        parameters that do not validate are left to the runtime, which names them all."""
        try:
            params = params_cls.model_validate(request_params(request))
        except ValidationError:
            return
        if params.model.uses_hf():
            data.check_folders(params.model, self.rt.inputs(context))

    @rpc_method
    async def SubmitPlanParallelism(self, request, context):
        await asyncio.to_thread(self._check_models, PlanParallelismParams, request, context)
        return training_pb2.SubmitPlanParallelismResponse(
            job=await self.rt.submit(context, "plan_parallelism", request)
        )

    @rpc_method
    async def SubmitTrain(self, request, context):
        await self._check_plan(context, request.plan_job_id)
        await asyncio.to_thread(self._check_models, TrainParams, request, context)
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
        scope = self.rt.inputs(context) if params.model.uses_hf() else None
        return await asyncio.to_thread(_plan, params, scope)


def _plan(params, scope=None) -> training_pb2.PlanResponse:
    cfg = data.config(params.model, scope=scope)
    if cfg.seq_len > INLINE_MAX_TOKENS:
        raise InvalidArgument(
            "model", f"{cfg.seq_len} tokens per sequence; at most {INLINE_MAX_TOKENS} inline"
        )
    modules = cfg.modules()
    if params.world_size > sum(modules.values()):
        raise InvalidArgument("world_size", f"exceeds the model's {sum(modules.values())} pipeline layers")
    n = partition.count_candidates(modules, params.world_size)
    if n > INLINE_MAX_CANDIDATES:
        raise InvalidArgument(
            "world_size",
            f"{n} candidate partitions; at most {INLINE_MAX_CANDIDATES} inline: "
            "submit a plan_parallelism job",
        )
    try:
        model = MLLM(cfg, weights=False)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise InvalidArgument("model", f"a Hugging Face config does not build: {exc}") from None
    model.apply_freeze(Freeze.pattern(params.pattern, cfg.encoders))
    prof = costs.analytic(model, params.batch_size // params.microbatches)
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
