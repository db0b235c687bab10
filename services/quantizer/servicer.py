"""QuantizerService: the thin gRPC edge. Submit* hand jobs to the runtime after the checks a
worker would fail on (a model folder the service can quantize, text that is there, a tenant's
SUCCEEDED quantize job for Evaluate); Generate and Score serve a quantize job's checkpoint on the
packed kernels on the server's device (bf16 autocast on CUDA), loaded once per checkpoint (cached
by sha256)."""

from __future__ import annotations

import asyncio

from paperworks.quantizer.v1 import quantizer_pb2, quantizer_pb2_grpc
from paperworks.shared.backends import BackendError, platform_error
from paperworks.shared.devices import autocast
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import InputScope
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from pydantic import ValidationError

from . import data
from .spec import EvaluateParams, QuantizeParams

CACHE_SIZE = 4
MAX_PROMPTS = 64
MAX_NEW_TOKENS = 1024


def check_quantize(request, scope: InputScope) -> None:
    """What a worker would refuse, refused before the job is queued: a model folder the service
    cannot quantize, a text path that is not there. Parameters that do not validate are left to
    the runtime's validation, which names them all."""
    try:
        params = QuantizeParams.model_validate(request_params(request))
    except ValidationError:
        return
    data.check_model(params.model, scope)
    if params.data.source is not None and params.data.source.path:
        data.text_path(params.data, scope)


def check_evaluate(request, scope: InputScope) -> None:
    """The quantize job an Evaluate names (the tenant's, a quantize job, SUCCEEDED, with its
    checkpoint), and a text path that is there."""
    try:
        params = EvaluateParams.model_validate(request_params(request))
    except ValidationError:
        return
    data.quantize_job(scope.store, scope.tenant, params.quantize_job_id, "quantize_job_id")
    if params.data.source is not None and params.data.source.path:
        data.text_path(params.data, scope)


def _backend_call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except BackendError as exc:
        raise platform_error(exc) from None


class QuantizerServicer(quantizer_pb2_grpc.QuantizerServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self.cache = ModelCache(CACHE_SIZE)
        self.device = data.server_device()  # where the cached packed models live

    @rpc_method
    async def SubmitQuantize(self, request, context):
        await asyncio.to_thread(check_quantize, request, self.rt.inputs(context))
        job = await self.rt.submit(context, "quantize", request)
        return quantizer_pb2.SubmitQuantizeResponse(job=job)

    @rpc_method
    async def SubmitEvaluate(self, request, context):
        await asyncio.to_thread(check_evaluate, request, self.rt.inputs(context))
        job = await self.rt.submit(context, "evaluate", request)
        return quantizer_pb2.SubmitEvaluateResponse(job=job)

    def _served(self, scope: InputScope, job_id: str):
        """The quantize job's base-model backend with its packed layers swapped in."""
        params, *shas = data.quantize_job(self.rt.store, scope.tenant, job_id, "quantize_job_id")

        def load():
            return data.packed_model(params, *data.read_checkpoint(self.rt.artifacts, *shas), scope,
                                     "quantize_job_id", self.device)

        return self.cache.get(shas[0], load)

    @staticmethod
    def _check_prompts(prompts) -> list[str]:
        if not 1 <= len(prompts) <= MAX_PROMPTS:
            raise InvalidArgument("prompts", f"{len(prompts)} prompts; 1 to {MAX_PROMPTS} per call")
        return list(prompts)

    def _generate(self, scope: InputScope, request):
        prompts = self._check_prompts(request.prompts)
        max_new = request.max_new_tokens if request.HasField("max_new_tokens") else 32
        if not 1 <= max_new <= MAX_NEW_TOKENS:
            raise InvalidArgument("max_new_tokens", f"{max_new}; must be 1..{MAX_NEW_TOKENS}")
        if not 0 <= request.temperature <= 10:
            raise InvalidArgument("temperature", f"{request.temperature}; must be 0..10")
        backend = self._served(scope, request.quantize_job_id)
        with autocast(self.device):
            gens = _backend_call(backend.generate, prompts, max_new_tokens=max_new,
                                 temperature=request.temperature, seed=request.seed)
        return quantizer_pb2.GenerateResponse(completions=[
            quantizer_pb2.Completion(text=g.text, finish_reason=g.finish_reason, token_ids=g.token_ids or [],
                                     logprobs=g.logprobs or []) for g in gens])

    def _score(self, scope: InputScope, request):
        prompts = self._check_prompts(request.prompts)
        if len(request.continuations) != len(prompts):
            raise InvalidArgument("continuations", f"{len(request.continuations)} continuations for "
                                                   f"{len(prompts)} prompts; one per prompt")
        backend = self._served(scope, request.quantize_job_id)
        with autocast(self.device):
            scores = _backend_call(backend.score, prompts, list(request.continuations))
        return quantizer_pb2.ScoreResponse(scores=[
            quantizer_pb2.ContinuationScore(logprobs=s.logprobs, total_logprob=s.total,
                                            token_ids=s.token_ids or []) for s in scores])

    @rpc_method
    async def Generate(self, request, context):
        return await asyncio.to_thread(self._generate, self.rt.inputs(context), request)

    @rpc_method
    async def Score(self, request, context):
        return await asyncio.to_thread(self._score, self.rt.inputs(context), request)
