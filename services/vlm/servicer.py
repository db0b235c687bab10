"""VlmService: the thin gRPC edge. Submit* check the jobs a request builds on (the tenant's, of a
kind that stores what is needed, SUCCEEDED) or the Hugging Face VLM folder it names, and hand jobs
to the runtime; Answer loads the tenant's model (a job's TinyVLM cached by artifact hash, an HF VLM
folder by its identity; on this server's device: `shared.devices.device`) and answers one image +
text query inline."""

from __future__ import annotations

import asyncio

import numpy as np
import torch
from paperworks.services.vlm import checkpoint, data
from paperworks.services.vlm.spec import (
    BOTH_MODELS,
    MODEL_KINDS,
    AnswerHFParams,
    VLMModelSpec,
    steer_refusal,
)
from paperworks.services.vlm.tinyvlm import COLORS, IMAGE_SIZE, answer_logprobs, encode
from paperworks.shared.devices import device
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.inputs import InputScope
from paperworks.shared.job_refs import finished_job, job_artifact
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.shared.rpc.tensors import to_numpy
from paperworks.vlm.v1 import vlm_pb2, vlm_pb2_grpc
from pydantic import ValidationError

CACHE_SIZE = 8
MAX_WORDS = 24
MAX_TEXT_CHARS = 1000
MAX_SIDE = 4096  # pixels a side of an image for a Hugging Face VLM


class VlmServicer(vlm_pb2_grpc.VlmServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self.cache = ModelCache(CACHE_SIZE)
        self.device = device()

    def _model_job(self, tenant: str, job_id: str, field: str, kinds=MODEL_KINDS):
        job = finished_job(self.rt.store, tenant, "vlm", job_id, field)
        if job.kind not in kinds:
            raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not one of {', '.join(kinds)}")
        return job

    def _check_steerable(self, tenant: str, audit_job_id: str) -> None:
        job = self._model_job(tenant, audit_job_id, "audit_job_id", ("audit_modality_following",))
        if (job.params or {}).get("model"):
            label = VLMModelSpec.model_validate(job.params["model"]).label
            raise InvalidArgument("audit_job_id", steer_refusal(audit_job_id, label))

    async def _check(self, context, job_id: str, field: str, kinds=MODEL_KINDS) -> None:
        """Refused at submit, not in the worker: a job that is not this tenant's SUCCEEDED job of `kinds`."""
        await asyncio.to_thread(self._model_job, self.rt.tenant(context), job_id, field, kinds)

    @rpc_method
    async def SubmitPretrain(self, request, context):
        return vlm_pb2.SubmitPretrainResponse(job=await self.rt.submit(context, "pretrain", request))

    @rpc_method
    async def SubmitBuildConflictSet(self, request, context):
        return vlm_pb2.SubmitBuildConflictSetResponse(
            job=await self.rt.submit(context, "build_conflict_set", request)
        )

    def _check_hf(self, scope: InputScope, request) -> None:
        """A Hugging Face VLM folder the worker would refuse, refused at submit (a server path's
        config and files; other sources must be archives)."""
        data.check_hf_model(_hf_spec(request), scope)

    @rpc_method
    async def SubmitAuditModalityFollowing(self, request, context):
        if request.model_job_id and request.HasField("model"):
            raise InvalidArgument("model", BOTH_MODELS)
        if request.model_job_id:
            await self._check(context, request.model_job_id, "model_job_id")
        elif request.HasField("model"):
            await asyncio.to_thread(self._check_hf, self.rt.inputs(context), request)
        return vlm_pb2.SubmitAuditModalityFollowingResponse(
            job=await self.rt.submit(context, "audit_modality_following", request)
        )

    @rpc_method
    async def SubmitSteerPreference(self, request, context):
        await asyncio.to_thread(self._check_steerable, self.rt.tenant(context), request.audit_job_id)
        return vlm_pb2.SubmitSteerPreferenceResponse(
            job=await self.rt.submit(context, "steer_preference", request)
        )

    @rpc_method
    async def SubmitTrainRL(self, request, context):
        await self._check(context, request.model_job_id, "model_job_id")
        return vlm_pb2.SubmitTrainRLResponse(job=await self.rt.submit(context, "train_rl", request))

    @rpc_method
    async def SubmitTrainSpatial(self, request, context):
        return vlm_pb2.SubmitTrainSpatialResponse(job=await self.rt.submit(context, "train_spatial", request))

    @rpc_method
    async def SubmitEvaluateSpatial(self, request, context):
        await self._check(context, request.model_job_id, "model_job_id", ("train_spatial",))
        return vlm_pb2.SubmitEvaluateSpatialResponse(
            job=await self.rt.submit(context, "evaluate_spatial", request)
        )

    def _answer_spatial(self, tenant: str, request) -> vlm_pb2.AnswerResponse:
        """SpatioLM: a train_spatial model, its branch included, on (F, 24, 24, 3) frames."""
        from paperworks.services.vlm.spatiolm import qa, world
        from paperworks.services.vlm.spatiolm.model import answer_logprobs as spatial_logprobs

        frames = _pixels(request, world.IMAGE, allow_frames=True)
        if len(request.text) > MAX_TEXT_CHARS:
            raise InvalidArgument("text", f"at most {MAX_TEXT_CHARS} characters")
        try:
            tokens = qa.encode(request.text)
        except KeyError as exc:
            raise InvalidArgument("text", f"word {exc.args[0]!r} is not in the spatial vocabulary") from None
        except ValueError as exc:
            raise InvalidArgument("text", str(exc)) from None
        if not request.text.split():
            raise InvalidArgument("text", "ask a question, e.g. 'which closer red or blue ?'")
        raw, sha = job_artifact(
            self.rt.store,
            self.rt.artifacts,
            tenant,
            "vlm",
            request.model_job_id,
            checkpoint.MODEL,
            "model_job_id",
        )
        model, _ = self.cache.get(sha, lambda: checkpoint.spatial_from_bytes(raw, self.device))
        if len(frames) != model.vlm.config.frames:
            raise InvalidArgument(
                "image.shape", f"this model reads {model.vlm.config.frames} frame(s), not {len(frames)}"
            )
        with torch.no_grad():
            logits, _ = model.logits(
                torch.as_tensor(frames[None], device=self.device),
                torch.as_tensor([tokens], device=self.device),
            )
            p = spatial_logprobs(logits).exp()[0].double().cpu().numpy()
        return vlm_pb2.AnswerResponse(
            answer=qa.ANSWERS[int(p.argmax())], options=list(qa.ANSWERS), probabilities=p.tolist()
        )

    def _answer(self, tenant: str, request) -> vlm_pb2.AnswerResponse:
        job = self._model_job(tenant, request.model_job_id, "model_job_id", MODEL_KINDS + ("train_spatial",))
        if job.kind == "train_spatial":
            return self._answer_spatial(tenant, request)
        image, tokens = _query(request)
        raw, sha = job_artifact(
            self.rt.store,
            self.rt.artifacts,
            tenant,
            "vlm",
            request.model_job_id,
            checkpoint.MODEL,
            "model_job_id",
        )
        model, _ = self.cache.get(sha, lambda: checkpoint.from_bytes(raw, self.device))
        if len(tokens) > model.config.max_text:
            raise InvalidArgument("text", f"at most {model.config.max_text} words for this model")
        with torch.no_grad():
            logits = model(
                torch.as_tensor(image[None], device=self.device),
                torch.as_tensor([tokens], device=self.device),
            )
            p = answer_logprobs(logits).exp()[0].double().cpu().numpy()
        return vlm_pb2.AnswerResponse(
            answer=COLORS[int(p.argmax())], options=list(COLORS), probabilities=p.tolist()
        )

    def _answer_hf(self, scope: InputScope, request) -> vlm_pb2.AnswerResponse:
        """A Hugging Face VLM folder (`hf_vlm`): any (H, W, 3) picture or none, any question, the
        request's options (or the colour words)."""
        try:
            params = AnswerHFParams.model_validate(
                request_params(request, exclude=("image", "text", "model_job_id"))
            )
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        image = _hf_pixels(request) if request.HasField("image") else None
        text = request.text.strip()
        if not text:
            raise InvalidArgument("text", "ask a question, e.g. 'what color is the object ?'")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidArgument("text", f"at most {MAX_TEXT_CHARS} characters")
        options = list(params.options) or list(COLORS)
        folder, where, shown = data.hf_folder(params.model, scope)
        from paperworks.services.vlm import hf_vlm

        model = self.cache.get(
            data.hf_identity(scope, folder), lambda: hf_vlm.load(folder, self.device, where, shown)
        )
        p = model.probabilities(None if image is None else [image], [text], options)[0]
        return vlm_pb2.AnswerResponse(
            answer=options[int(p.argmax())], options=options, probabilities=p.tolist()
        )

    @rpc_method
    async def Answer(self, request, context):
        if request.model_job_id and request.HasField("model"):
            raise InvalidArgument("model", BOTH_MODELS)
        if request.HasField("model"):
            return await asyncio.to_thread(self._answer_hf, self.rt.inputs(context), request)
        tenant = self.rt.tenant(context)
        if not request.model_job_id:
            raise InvalidArgument(
                "model_job_id", "name the vlm job whose model answers (or set model: a Hugging Face VLM)"
            )
        return await asyncio.to_thread(self._answer, tenant, request)


def _hf_spec(request) -> VLMModelSpec:
    """The request's `model` as a VLMModelSpec; refusals name model.<field>."""
    try:
        return VLMModelSpec.model_validate(request_params(request.model, exclude=()))
    except ValidationError as exc:
        raise violations_from_pydantic(exc, "model.") from None


def _hf_pixels(request) -> np.ndarray:
    """The request's image for a Hugging Face VLM: (H, W, 3), float in [0, 1] or uint8."""
    image = to_numpy(request.image, "image")
    if (
        image.ndim != 3
        or image.shape[2] != 3
        or not 1 <= min(image.shape[:2]) <= max(image.shape[:2]) <= MAX_SIDE
    ):
        raise InvalidArgument(
            "image.shape", f"must be [height, width, 3] (1..{MAX_SIDE} a side), not {list(image.shape)}"
        )
    if image.dtype == np.uint8:
        return image
    if image.dtype not in (np.float16, np.float32, np.float64):
        raise InvalidArgument("image.dtype", "must be float32 (0..1) or uint8 (0..255)")
    image = image.astype(np.float32)
    if not np.isfinite(image).all() or image.min() < 0 or image.max() > 1:
        raise InvalidArgument("image.data", "float pixels must be finite and in [0, 1]")
    return image


def _pixels(request, size: int, allow_frames: bool = False) -> np.ndarray:
    """The request's image as float32 in [0, 1]: (size, size, 3), or with `allow_frames`
    (F, size, size, 3)."""
    image = to_numpy(request.image, "image")
    shape = tuple(image.shape)
    if allow_frames and shape == (size, size, 3):
        image, shape = image[None], (1, *shape)
    ok = (
        shape == (size, size, 3)
        if not allow_frames
        else (len(shape) == 4 and 1 <= shape[0] <= 4 and shape[1:] == (size, size, 3))
    )
    if not ok:
        want = f"[{size}, {size}, 3]" + (f" or [frames 1..4, {size}, {size}, 3]" if allow_frames else "")
        raise InvalidArgument("image.shape", f"must be {want}, not {list(shape)}")
    if image.dtype == np.uint8:
        image = image.astype(np.float32) / 255.0
    elif image.dtype in (np.float16, np.float32, np.float64):
        image = image.astype(np.float32)
        if not np.isfinite(image).all() or image.min() < 0 or image.max() > 1:
            raise InvalidArgument("image.data", "float pixels must be finite and in [0, 1]")
    else:
        raise InvalidArgument("image.dtype", "must be float32 (0..1) or uint8 (0..255)")
    return image


def _query(request) -> tuple[np.ndarray, list[int]]:
    """The request's image as (16, 16, 3) float32 in [0, 1] and its text as word ids, checked
    before any model is loaded."""
    image = _pixels(request, IMAGE_SIZE)
    if len(request.text) > MAX_TEXT_CHARS:
        raise InvalidArgument("text", f"at most {MAX_TEXT_CHARS} characters")
    words = request.text.split()
    if not words:
        raise InvalidArgument("text", "ask a question, e.g. 'what color is the circle ?'")
    if len(words) > MAX_WORDS:
        raise InvalidArgument("text", f"at most {MAX_WORDS} words")
    try:
        tokens = encode(words)
    except KeyError as exc:
        raise InvalidArgument("text", f"word {exc.args[0]!r} is not in the model's vocabulary") from None
    return image, tokens
