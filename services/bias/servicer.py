"""BiasService: the thin gRPC edge of the bias service."""

from __future__ import annotations

import asyncio

from paperworks.bias.v1 import bias_pb2, bias_pb2_grpc
from paperworks.services.bias.cab.placeholders import PlaceholderError, parse_template
from paperworks.services.bias.cab.taxonomy import DEFAULT_ATTRIBUTES
from paperworks.services.bias.data import BENCHMARK_ARTIFACT
from paperworks.services.bias.spec import ExpandPlaceholdersParams, ScoreMCQResponseParams
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.job_refs import artifact_sha, finished_job
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from pydantic import ValidationError


def _validate(model, request):
    """The request as `model` (an unset optional field is left out, so its default applies)."""
    try:
        return model.model_validate(request_params(request))
    except ValidationError as exc:
        raise violations_from_pydantic(exc) from None


class BiasServicer(bias_pb2_grpc.BiasServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt

    @rpc_method
    async def SubmitGenerateBenchmark(self, request, context):
        job = await self.rt.submit(context, "generate_benchmark", request)
        return bias_pb2.SubmitGenerateBenchmarkResponse(job=job)

    @rpc_method
    async def SubmitEvaluateBias(self, request, context):
        if request.source_job_id:  # refused before anything is written, as the worker would
            await asyncio.to_thread(self._benchmark_job, self.rt.tenant(context), request.source_job_id)
        return bias_pb2.SubmitEvaluateBiasResponse(
            job=await self.rt.submit(context, "evaluate_bias", request)
        )

    @rpc_method
    async def SubmitEvaluateMCQ(self, request, context):
        return bias_pb2.SubmitEvaluateMCQResponse(job=await self.rt.submit(context, "evaluate_mcq", request))

    def _benchmark_job(self, tenant: str, job_id: str) -> None:
        """The tenant's SUCCEEDED generate_benchmark job `job_id`, with its benchmark stored."""
        job = finished_job(self.rt.store, tenant, "bias", job_id, "source_job_id", kind="generate_benchmark")
        artifact_sha(self.rt.store, job.id, BENCHMARK_ARTIFACT, "source_job_id")

    @rpc_method
    async def ExpandPlaceholders(self, request, context):
        self.rt.tenant(context)
        params = _validate(ExpandPlaceholdersParams, request)
        attribute = None
        if params.attribute:
            attribute = DEFAULT_ATTRIBUTES.get(params.attribute)
            if attribute is None:
                raise InvalidArgument(
                    "attribute",
                    f"unknown attribute {params.attribute!r} (known: {', '.join(DEFAULT_ATTRIBUTES)})",
                )
        try:
            template = parse_template(params.template, attribute)
        except PlaceholderError as exc:
            raise InvalidArgument("template", exc.message) from None
        framings = {attribute.form_of(ph.options) for ph in template.placeholders} if attribute else set()
        framing = "explicit" if "explicit" in framings else "implicit" if framings == {"implicit"} else ""
        return bias_pb2.ExpandPlaceholdersResponse(
            variants=template.variants(),
            placeholders=[bias_pb2.OptionForms(options=o) for o in template.option_sets()],
            framing=framing,
        )

    @rpc_method
    async def ScoreMCQResponse(self, request, context):
        self.rt.tenant(context)
        params = _validate(ScoreMCQResponseParams, request)
        if params.answer is not None and params.answer >= len(params.options):
            raise InvalidArgument(
                "answer", f"index {params.answer} is out of range for {len(params.options)} options"
            )
        match = await asyncio.to_thread(_score, params)
        reply = bias_pb2.ScoreMCQResponseResponse(
            index=-1 if match.index is None else match.index, method=match.method
        )
        if match.similarity is not None:
            reply.similarity = match.similarity
        if match.margin is not None:
            reply.margin = match.margin
        if params.answer is not None:
            reply.correct = match.index == params.answer
        return reply


def _score(params: ScoreMCQResponseParams):
    if params.protocol == "standard":
        from paperworks.services.bias.mcq.match import parse_letter

        return parse_letter(params.response, len(params.options))
    from paperworks.services.bias.embedder import get_embedder
    from paperworks.services.bias.mcq.match import match_text
    from paperworks.shared.devices import device

    # the MiniLM on the device this server's jobs would use (JobContext.device's rule)
    return match_text(params.response, params.options, lambda: get_embedder(device()))
