"""ClipService: the thin gRPC edge. Submit* check the jobs a request builds on and hand jobs to the
runtime. Classify loads the tenant's tiny CLIP (cached by artifact hash) or the tenant's own
Hugging Face CLIP checkpoint (read through the tenant's inputs, cached under a key holding the
tenant), on this server's device, and runs one method on one image inline; RITA's online mode keeps
a per-tenant stream cache (`StreamCaches`: bounded LRU over (tenant, stream id, model, classes),
evictable with reset_stream). ScorePairs scores row-aligned image-text pairs with a trained
adapter, on the model (tiny or checkpoint) the adapter was trained on."""

from __future__ import annotations

import asyncio
import hashlib
import math
import threading
import time
from collections import OrderedDict

import torch
from paperworks.clip.v1 import clip_pb2, clip_pb2_grpc
from paperworks.services.clip import data, vacsr, world
from paperworks.services.clip.rita import ClassCache, Stream, TTAConfig
from paperworks.services.clip.spec import ClassifyParams, ScorePairsParams
from paperworks.shared.devices import device
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.inputs import InputRefParams, InputScope
from paperworks.shared.job_refs import finished_job, job_artifact
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.shared.rpc.tensors import to_numpy
from pydantic import ValidationError

CACHE_SIZE = 8
MAX_STREAMS = 256
MAX_PAIRS = 64
INLINE_MAX_SIDE = 256


class StreamCaches:
    """RITA's online state: one ClassCache per (tenant, stream id, model sha, classes,
    descriptors), at most `size` streams, least recently used evicted first."""

    def __init__(self, size: int = MAX_STREAMS):
        self.size = size
        self._items: OrderedDict[tuple, ClassCache] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> ClassCache | None:
        with self._lock:
            cache = self._items.get(key)
            if cache is not None:
                self._items.move_to_end(key)
            return cache

    def put(self, key: tuple, cache: ClassCache) -> None:
        with self._lock:
            self._items[key] = cache
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def drop(self, key: tuple) -> None:
        with self._lock:
            self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)


class ClipServicer(clip_pb2_grpc.ClipServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self.models = ModelCache(CACHE_SIZE)
        self.streams = StreamCaches()
        self.device = device()
        self._lock = threading.Lock()

    def _job(self, tenant: str, job_id: str, field: str, kind: str):
        job = finished_job(self.rt.store, tenant, "clip", job_id, field)
        if job.kind != kind:
            raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not a {kind} job")
        return job

    async def _check_model(self, context, request) -> None:
        if request.HasField("model") and request.model.WhichOneof("source") == "model_job_id":
            await asyncio.to_thread(
                self._job,
                self.rt.tenant(context),
                request.model.model_job_id,
                "model.model_job_id",
                "train_clip",
            )

    @rpc_method
    async def SubmitTrainCLIP(self, request, context):
        return clip_pb2.SubmitTrainCLIPResponse(job=await self.rt.submit(context, "train_clip", request))

    @rpc_method
    async def SubmitEvaluateRobustness(self, request, context):
        await self._check_model(context, request)
        return clip_pb2.SubmitEvaluateRobustnessResponse(
            job=await self.rt.submit(context, "evaluate_robustness", request)
        )

    @rpc_method
    async def SubmitTrainAdapter(self, request, context):
        await self._check_model(context, request)
        return clip_pb2.SubmitTrainAdapterResponse(
            job=await self.rt.submit(context, "train_adapter", request)
        )

    @rpc_method
    async def SubmitEvaluateRetrieval(self, request, context):
        await asyncio.to_thread(
            self._job, self.rt.tenant(context), request.adapter_job_id, "adapter_job_id", "train_adapter"
        )
        return clip_pb2.SubmitEvaluateRetrievalResponse(
            job=await self.rt.submit(context, "evaluate_retrieval", request)
        )

    # --- sync RPCs ------------------------------------------------------------------------
    def _encoder(self, tenant: str, job_id: str, field: str):
        self._job(tenant, job_id, field, "train_clip")
        raw, sha = job_artifact(self.rt.store, self.rt.artifacts, tenant, "clip", job_id, data.MODEL, field)
        encoder, _ = self.models.get(sha, lambda: data.model_from_bytes(raw, self.device, field))
        return encoder, sha

    def _checkpoint_encoder(self, scope: InputScope, ref: InputRefParams, field: str):
        """A user's CLIP checkpoint, read for the caller's tenant and kept per tenant (the key
        holds the tenant, so one tenant's call never finds another's loaded model)."""
        folder = data.checkpoint_folder(ref, scope, field)
        key = (
            "checkpoint:"
            + hashlib.sha256(f"{scope.tenant}:{data.checkpoint_identity(folder)}".encode()).hexdigest()
        )
        return self.models.get(key, lambda: data.load_checkpoint(folder, self.device, field)), key

    def _classify(
        self, scope: InputScope, p: ClassifyParams, image: torch.Tensor
    ) -> clip_pb2.ClassifyResponse:
        tenant = scope.tenant
        if bool(p.model_job_id) == (p.checkpoint is not None):
            raise InvalidArgument(
                "model_job_id",
                "set exactly one of model_job_id (a train_clip job) and checkpoint (a CLIP folder)",
            )
        if p.model_job_id:
            encoder, sha = self._encoder(tenant, p.model_job_id, "model_job_id")
        else:
            encoder, sha = self._checkpoint_encoder(scope, p.checkpoint, "checkpoint")
        classes = list(p.classes) or list(world.SHAPES)
        descriptors = list(p.descriptors) or (list(world.TEXTURES) if not p.classes else None)
        key = (tenant, p.stream_id, sha, tuple(classes), tuple(descriptors or ()))
        if p.reset_stream and p.stream_id:
            self.streams.drop(key)
        with self._lock:  # one model, shared prompt parameters: one inline adaptation at a time
            try:
                cache = self.streams.get(key) if p.stream_id else None
                stream = Stream(encoder, classes, descriptors, TTAConfig(views=p.views), cache)
            except ValueError as exc:
                raise InvalidArgument("classes", f"not usable with this model: {exc}") from None
            start = time.perf_counter()
            scores = stream.predict(p.method, image, p.seed).detach().float().cpu()
            runtime = time.perf_counter() - start
        entries = 0
        if p.method == "rita" and p.stream_id:
            self.streams.put(key, stream.cache)
            entries = len(stream.cache)
        return clip_pb2.ClassifyResponse(
            label=classes[int(scores.argmax())],
            classes=classes,
            scores=scores.double().tolist(),
            method=p.method,
            runtime_s=runtime,
            cache_entries=entries,
        )

    @rpc_method
    async def Classify(self, request, context):
        try:
            params = ClassifyParams.model_validate(request_params(request, exclude=("image",)))
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        image = _image(request.image, "image")
        return await asyncio.to_thread(self._classify, self.rt.inputs(context), params, image)

    def _score(
        self, scope: InputScope, p: ScorePairsParams, images: torch.Tensor
    ) -> clip_pb2.ScorePairsResponse:
        tenant = scope.tenant
        self._job(tenant, p.adapter_job_id, "adapter_job_id", "train_adapter")
        raw, sha = job_artifact(
            self.rt.store, self.rt.artifacts, tenant, "clip", p.adapter_job_id, data.ADAPTER, "adapter_job_id"
        )
        meta, state, info = data.adapter_from_bytes(raw, "adapter_job_id")
        model = info.get("model", {})
        if model.get("model_job_id"):
            encoder, _ = self._encoder(tenant, model["model_job_id"], "adapter_job_id")
        elif model.get("checkpoint"):  # the tenant's own checkpoint the adapter was trained on
            ref = InputRefParams.model_validate(model["checkpoint"])
            encoder, _ = self._checkpoint_encoder(scope, ref, "adapter_job_id")
        else:
            raise InvalidArgument("adapter_job_id", "the adapter names no model it was trained on")
        adapter = self.models.get("adapter:" + sha, lambda: vacsr.load_adapter(meta, state, self.device))
        try:
            with torch.no_grad():
                img = encoder.encode_image(images)
                txt = encoder.encode_text(list(p.texts))
        except ValueError as exc:
            raise InvalidArgument("texts", str(exc)) from None
        mean, var = vacsr.score_pairs(adapter, img, txt, self.device)
        return clip_pb2.ScorePairsResponse(
            scores=mean.double().tolist(),
            uncertainties=(var.double().tolist() if var is not None else [0.0] * len(mean)),
            has_uncertainty=var is not None,
        )

    @rpc_method
    async def ScorePairs(self, request, context):
        try:
            params = ScorePairsParams.model_validate(request_params(request, exclude=("images",)))
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        images = _images(request.images, "images", MAX_PAIRS)
        if len(images) != len(params.texts):
            raise InvalidArgument(
                "texts", f"one text per image: {len(images)} images, {len(params.texts)} texts"
            )
        return await asyncio.to_thread(self._score, self.rt.inputs(context), params, images)


def _images(tensor, field: str, max_n: int) -> torch.Tensor:
    if not tensor.shape:
        raise InvalidArgument(field, "send (N, H, W, 3) pixels")
    if len(tensor.shape) != 4 or math.prod(tensor.shape) > max_n * INLINE_MAX_SIDE**2 * 3:
        raise InvalidArgument(
            f"{field}.shape", f"must be (N, H, W, 3) with N <= {max_n}, sides <= {INLINE_MAX_SIDE}"
        )
    return data.check_images(to_numpy(tensor, field), field, max_n)


def _image(tensor, field: str) -> torch.Tensor:
    """One (H, W, 3) image -> (3, H, W) float32 in [0, 1]."""
    if not tensor.shape:
        raise InvalidArgument(field, "send (H, W, 3) pixels")
    if len(tensor.shape) != 3 or math.prod(tensor.shape) > INLINE_MAX_SIDE**2 * 3:
        raise InvalidArgument(f"{field}.shape", f"must be (H, W, 3) with sides <= {INLINE_MAX_SIDE}")
    return data.check_images(to_numpy(tensor, field)[None], field, 1)[0]
