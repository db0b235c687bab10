"""RouterService: the thin gRPC edge (two Submit RPCs and the sync Route).

Every job a request names is checked here, before anything is written: TrainDecider's
`local.quantize_job_id` must be the caller's SUCCEEDED quantizer job that announced a model (only
Quantize jobs do); Route's `policy_job_id` the caller's SUCCEEDED router job with a policy. (The
inputs a job reads, `InputRef`s, are checked by `ServiceRuntime.submit`.) Route's routers are
cached by policy sha256 on the server's device (`paperworks.shared.devices.device`, the rule a
job's `ctx.device` follows).
"""

from __future__ import annotations

import asyncio
import threading

from paperworks.router.v1 import router_pb2, router_pb2_grpc
from paperworks.services.router.checkpoint import FILE_NAME, load_policy
from paperworks.shared.announced import announced_model, load_announced
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import InputScope
from paperworks.shared.job_refs import artifact_sha, finished_job
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.shared.rpc.tensors import to_numpy

CACHED_POLICIES = 8
DATASETS = ("synthetic", "text_families", "logged")


class RouterServicer(router_pb2_grpc.RouterServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self._routers = ModelCache(CACHED_POLICIES)  # policy sha256 -> loaded router
        self._policy_of: dict[tuple[str, str], str] = {}  # (tenant, job id) -> policy sha256
        self._lock = threading.Lock()

    @rpc_method
    async def SubmitTrainRejector(self, request, context):
        if request.WhichOneof("dataset") is None:  # a oneof: name the fields a user can set
            why = "set one dataset: synthetic, text_families or logged"
            raise InvalidArgument("synthetic", why, [(f, why) for f in DATASETS])
        return router_pb2.SubmitTrainRejectorResponse(
            job=await self.rt.submit(context, "train_rejector", request)
        )

    @rpc_method
    async def SubmitTrainDecider(self, request, context):
        if request.local.quantize_job_id:  # refused before anything is written, like the worker would
            await asyncio.to_thread(
                announced_model,
                self.rt.store,
                self.rt.tenant(context),
                "quantizer",
                request.local.quantize_job_id,
                "local.quantize_job_id",
            )
        return router_pb2.SubmitTrainDeciderResponse(
            job=await self.rt.submit(context, "train_decider", request)
        )

    @rpc_method
    async def Route(self, request, context):
        inputs = self.rt.inputs(context)
        sha, router = await asyncio.to_thread(self._router, inputs, request.policy_job_id)
        features = to_numpy(request.features, "features") if request.HasField("features") else None
        timeout = request.timeout_s if request.HasField("timeout_s") else None
        remaining = context.time_remaining()
        if request.execute and remaining is not None:
            timeout = min(timeout or remaining, remaining)
        from paperworks.services.router.routing import route  # torch loads on first use, not at startup

        decision = await asyncio.to_thread(
            route,
            router,
            text=request.text if request.WhichOneof("input") == "text" else None,
            features=features,
            cost_lambda=request.cost_lambda if request.WhichOneof("preference") == "cost_lambda" else None,
            budget=request.budget if request.WhichOneof("preference") == "budget" else None,
            execute=request.execute,
            timeout_s=timeout,
            max_answer_tokens=request.max_answer_tokens if request.HasField("max_answer_tokens") else None,
            first_line_only=request.first_line_only,
            inputs=inputs,
        )
        return router_pb2.RouteResponse(
            agent=decision.agent,
            agent_index=decision.index,
            scores=[
                router_pb2.OptionScore(name=n, score=s, cost=c, utility=u)
                for n, s, c, u in zip(
                    decision.names, decision.scores, decision.costs, decision.utilities, strict=True
                )
            ],
            accepted_local=decision.accepted_local,
            local_answer=decision.local_answer,
            executed=decision.executed,
            answer=decision.answer,
            policy_kind=router.kind,
            policy_sha256=sha,
            cost_lambda=decision.cost_lambda,
            decision_ms=decision.decision_ms,
            finish_reason=decision.finish_reason,
        )

    def _router(self, inputs: InputScope, job_id: str):
        """The loaded router of a finished job's policy, cached by the policy's sha256 (a SUCCEEDED
        job's artifacts never change, so the job -> policy lookup is cached too)."""
        tenant = inputs.tenant
        if not job_id:
            raise InvalidArgument("policy_job_id", "name the TrainRejector or TrainDecider job to route with")
        with self._lock:
            sha = self._policy_of.get((tenant, job_id))
        if sha is None:
            finished_job(self.rt.store, tenant, self.rt.spec.name, job_id, "policy_job_id")
            sha = artifact_sha(self.rt.store, job_id, FILE_NAME, "policy_job_id")
            with self._lock:
                if len(self._policy_of) > 64 * CACHED_POLICIES:
                    self._policy_of.clear()
                self._policy_of[(tenant, job_id)] = sha

        def load():
            from paperworks.services.router.routing import load_router

            def open_announced(service: str, announced_job_id: str, field: str):
                return load_announced(
                    self.rt.store, self.rt.artifacts, tenant, service, announced_job_id, field
                )

            from paperworks.shared.devices import device

            policy = load_policy(self.rt.artifacts.path(sha).read_bytes())
            return load_router(policy, open_announced, device(), inputs)

        return sha, self._routers.get(sha, load)
