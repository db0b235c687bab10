"""MoeService: the thin gRPC edge. Submit* check the jobs a request builds on (the tenant's, of a
kind that stores what is needed, SUCCEEDED) and hand jobs to the runtime; Route loads the tenant's
MoE (cached by artifact hash, on this server's device) and returns its routing of given token
features; Act asks a trained skill policy for one action chunk."""

from __future__ import annotations

import asyncio

import numpy as np
import torch
from paperworks.moe.v1 import moe_pb2, moe_pb2_grpc
from paperworks.services.moe import checkpoint, data, hf_model, skillnet, skills
from paperworks.services.moe.dpsl.train import route
from paperworks.services.moe.spec import MOE_KINDS, POLICY_KINDS, TrainMoEParams, UpcycleParams
from paperworks.shared.devices import device
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.job_refs import finished_job, job_artifact
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.shared.rpc.tensors import from_numpy, to_numpy
from pydantic import ValidationError

CACHE_SIZE = 8
MAX_TOKENS = 4096
MAX_LENGTH = 64


class MoeServicer(moe_pb2_grpc.MoeServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self.cache = ModelCache(CACHE_SIZE)
        self.device = device()

    def _job(self, tenant: str, job_id: str, field: str, kinds, hf: bool = False):
        """The job, refused unless `hf` allows a Hugging Face MoE (model.tar) where an MoE is named."""
        job = finished_job(self.rt.store, tenant, "moe", job_id, field)
        if job.kind not in kinds:
            raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not one of {', '.join(kinds)}")
        if kinds == MOE_KINDS and not hf and data.hf_moe(self.rt.store, job):
            raise InvalidArgument(field, data.HF_REFUSAL.format(job_id=job_id))
        return job

    async def _check(self, context, job_id: str, field: str, kinds, hf: bool = False):
        """Refused at submit, not in the worker: a job that is not this tenant's SUCCEEDED job of `kinds`."""
        return await asyncio.to_thread(self._job, self.rt.tenant(context), job_id, field, kinds, hf)

    def _check_base(self, request, context) -> None:
        """A Hugging Face `base` the worker would refuse (a folder of a family with no MoE class
        here, no config, pickle weights, an upload that is no archive), refused at submit;
        parameters that do not validate are left to the runtime, which names them all."""
        try:
            params = UpcycleParams.model_validate(request_params(request))
        except ValidationError:
            return
        if params.base is not None:
            hf_model.check_base(params.base, self.rt.inputs(context))

    @rpc_method
    async def SubmitUpcycle(self, request, context):
        await asyncio.to_thread(self._check_base, request, context)
        return moe_pb2.SubmitUpcycleResponse(job=await self.rt.submit(context, "upcycle", request))

    @rpc_method
    async def SubmitTrainMoe(self, request, context):
        job = await self._check(context, request.model_job_id, "model_job_id", MOE_KINDS, hf=True)
        if await asyncio.to_thread(data.hf_moe, self.rt.store, job):
            try:
                terms = TrainMoEParams.model_validate(request_params(request)).router_losses
            except ValidationError:
                terms = []  # the runtime's validation names every bad field
            data.check_hf_terms(terms)
        return moe_pb2.SubmitTrainMoeResponse(job=await self.rt.submit(context, "train_moe", request))

    @rpc_method
    async def SubmitEvaluateRouting(self, request, context):
        await self._check(context, request.model_job_id, "model_job_id", MOE_KINDS)
        return moe_pb2.SubmitEvaluateRoutingResponse(
            job=await self.rt.submit(context, "evaluate_routing", request)
        )

    @rpc_method
    async def SubmitTrainSkillPolicy(self, request, context):
        return moe_pb2.SubmitTrainSkillPolicyResponse(
            job=await self.rt.submit(context, "train_skill_policy", request)
        )

    @rpc_method
    async def SubmitEvaluateSkills(self, request, context):
        await self._check(context, request.model_job_id, "model_job_id", POLICY_KINDS)
        return moe_pb2.SubmitEvaluateSkillsResponse(
            job=await self.rt.submit(context, "evaluate_skills", request)
        )

    def _artifact(self, tenant: str, job_id: str, name: str, kinds):
        self._job(tenant, job_id, "model_job_id", kinds)
        return job_artifact(self.rt.store, self.rt.artifacts, tenant, "moe", job_id, name, "model_job_id")

    def _route(self, tenant: str, request) -> moe_pb2.RouteResponse:
        x = _tokens(request)
        raw, sha = self._artifact(tenant, request.model_job_id, checkpoint.MODEL, MOE_KINDS)
        model, _ = self.cache.get(sha, lambda: checkpoint.from_bytes(raw, self.device, "model_job_id"))
        if x.shape[2] != model.config.d_in:
            raise InvalidArgument("inputs.shape", f"tokens must be {model.config.d_in} wide for this model")
        with torch.no_grad():
            probs = route(model, torch.as_tensor(x, device=self.device))
            b, length = x.shape[:2]
            selected = torch.stack([r["selected"].reshape(b, length, -1) for r in model.routing()])
        return moe_pb2.RouteResponse(
            probabilities=from_numpy(probs.float().cpu().numpy()),
            selected=from_numpy(selected.cpu().numpy().astype(np.int64)),
        )

    @rpc_method
    async def Route(self, request, context):
        tenant = self.rt.tenant(context)
        if not request.model_job_id:
            raise InvalidArgument("model_job_id", "name the upcycle or train_moe job whose MoE routes")
        return await asyncio.to_thread(self._route, tenant, request)

    def _act(self, tenant: str, request) -> moe_pb2.ActResponse:
        observation, instruction = skills.check_query(request)
        weights, sha = self._artifact(tenant, request.model_job_id, skills.POLICY, POLICY_KINDS)
        config, _ = self._artifact(tenant, request.model_job_id, skills.CONFIG, POLICY_KINDS)
        policy = self.cache.get(sha, lambda: skills.load_policy(weights, config, self.device, "model_job_id"))
        actions = skillnet.act(policy, observation, instruction)
        return moe_pb2.ActResponse(actions=from_numpy(np.asarray(actions, np.float32)))

    @rpc_method
    async def Act(self, request, context):
        tenant = self.rt.tenant(context)
        if not request.model_job_id:
            raise InvalidArgument("model_job_id", "name the train_skill_policy job whose policy acts")
        return await asyncio.to_thread(self._act, tenant, request)


def _tokens(request) -> np.ndarray:
    """The request's token features as float32 (B, L, d_in), checked before any model is loaded."""
    x = to_numpy(request.inputs, "inputs")
    if x.ndim != 3:
        raise InvalidArgument("inputs.shape", f"must be (batch, length, d_in), not {list(x.shape)}")
    if x.shape[1] > MAX_LENGTH or x.shape[0] * x.shape[1] > MAX_TOKENS or 0 in x.shape:
        raise InvalidArgument(
            "inputs.shape", f"1..{MAX_LENGTH} tokens per sequence and 1..{MAX_TOKENS} tokens in all"
        )
    if x.dtype not in (np.float16, np.float32, np.float64):
        raise InvalidArgument("inputs.dtype", "must be float32")
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        raise InvalidArgument("inputs.data", "must be finite")
    return x
