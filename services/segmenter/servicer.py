"""SegmenterService: the thin gRPC edge. Submit* hand jobs to the runtime; Segment and Denoise load
the tenant's trained model (cached by artifact sha256) and answer inline for volumes up to
`INLINE_MAX_VOXELS`."""

from __future__ import annotations

import asyncio

import numpy as np
from paperworks.segmenter.v1 import segmenter_pb2, segmenter_pb2_grpc
from paperworks.services.segmenter import data
from paperworks.services.segmenter.checkpoint import Denoiser, Segmenter, structure_stats
from paperworks.services.segmenter.data import Volume
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.job_refs import job_artifact
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.shared.rpc.tensors import from_numpy, to_numpy

CACHE_SIZE = 8
INLINE_MAX_VOXELS = 128**3


def request_volume(request) -> Volume:
    """The request's volume: `image_nifti` bytes, or `image` tensor + `spacing`; exactly one."""
    has_nifti, has_tensor = bool(request.image_nifti), request.HasField("image")
    if has_nifti == has_tensor:
        raise InvalidArgument("image_nifti", "set exactly one of image_nifti and image")
    if has_nifti:
        if request.spacing:
            raise InvalidArgument("spacing", "comes from the NIfTI header; leave it empty")
        v = data.read_nifti(request.image_nifti, "image_nifti")
        field = "image_nifti"
    else:
        array = to_numpy(request.image, "image")
        if array.ndim not in (2, 3) or min(array.shape, default=0) < 1:
            raise InvalidArgument(
                "image.shape", f"{list(array.shape)}: a non-empty 2-D or 3-D volume is required"
            )
        spacing = tuple(request.spacing) or (1.0,) * array.ndim
        if len(spacing) != array.ndim:
            raise InvalidArgument("spacing", f"{len(spacing)} values for a {array.ndim}-D image")
        if not all(np.isfinite(s) and s > 0 for s in spacing):
            raise InvalidArgument("spacing", f"{list(spacing)} must be finite and positive")
        affine = np.diag([*spacing, *([1.0] * (4 - array.ndim))])
        v, field = Volume("volume", array, spacing, affine), "image"
    if v.data.size > INLINE_MAX_VOXELS:
        raise InvalidArgument(
            field, f"{v.data.size} voxels; at most {INLINE_MAX_VOXELS} inline, submit a job"
        )
    return data.as_image(v, field)


class SegmenterServicer(segmenter_pb2_grpc.SegmenterServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self.cache = ModelCache(CACHE_SIZE)

    @rpc_method
    async def SubmitFitMinorParams(self, request, context):
        job = await self.rt.submit(context, "fit_minor_params", request)
        return segmenter_pb2.SubmitFitMinorParamsResponse(job=job)

    @rpc_method
    async def SubmitTrainSegmenter(self, request, context):
        job = await self.rt.submit(context, "train_segmenter", request)
        return segmenter_pb2.SubmitTrainSegmenterResponse(job=job)

    @rpc_method
    async def SubmitSegment(self, request, context):
        return segmenter_pb2.SubmitSegmentResponse(job=await self.rt.submit(context, "segment", request))

    @rpc_method
    async def SubmitTrainDenoiser(self, request, context):
        job = await self.rt.submit(context, "train_denoiser", request)
        return segmenter_pb2.SubmitTrainDenoiserResponse(job=job)

    @rpc_method
    async def SubmitDenoise(self, request, context):
        return segmenter_pb2.SubmitDenoiseResponse(job=await self.rt.submit(context, "denoise", request))

    def _model(self, tenant, job_id, kind, name, cls):
        raw, sha = job_artifact(
            self.rt.store, self.rt.artifacts, tenant, "segmenter", job_id, name, "model_job_id", kind
        )
        return self.cache.get(sha, lambda: cls.from_bytes(raw))

    def _segment(self, tenant, request):
        seg = self._model(tenant, request.model_job_id, "train_segmenter", "segmenter.safetensors", Segmenter)
        threshold = request.threshold if request.HasField("threshold") else 0.5
        if not 0 < threshold < 1:
            raise InvalidArgument("threshold", "must lie in (0, 1)")
        v = request_volume(request)
        labels, minor = seg.segment(v.data, v.spacing, threshold)
        stats = [
            segmenter_pb2.StructureStats(**s)
            for s in structure_stats(labels, v.data, v.spacing, seg.structures)
        ]
        return segmenter_pb2.SegmentResponse(
            labels_nifti=data.write_nifti(labels, v.spacing, v.affine),
            labels=from_numpy(labels),
            structures=stats,
            supernodes=minor.nodes,
        )

    def _denoise(self, tenant, request):
        den = self._model(tenant, request.model_job_id, "train_denoiser", "denoiser.safetensors", Denoiser)
        v = request_volume(request)
        out = den.denoise(v.data).astype(np.float32)
        return segmenter_pb2.DenoiseResponse(
            image_nifti=data.write_nifti(out, v.spacing, v.affine), image=from_numpy(out)
        )

    @rpc_method
    async def Segment(self, request, context):
        return await asyncio.to_thread(self._segment, self.rt.tenant(context), request)

    @rpc_method
    async def Denoise(self, request, context):
        return await asyncio.to_thread(self._denoise, self.rt.tenant(context), request)
