"""SegmenterService: the thin gRPC edge. Submit* check the jobs a request builds on (the tenant's,
of the right kind, finished: refused at submit, not later in the worker) and hand the job to the
runtime; Segment and Denoise load the tenant's trained model onto this process's device (cached by
artifact sha256) and answer inline for volumes up to `INLINE_MAX_VOXELS`."""

from __future__ import annotations

import asyncio

import numpy as np
from google.protobuf import json_format
from paperworks.segmenter.v1 import segmenter_pb2, segmenter_pb2_grpc
from paperworks.services.segmenter import data
from paperworks.services.segmenter.checkpoint import Denoiser, Segmenter, structure_stats
from paperworks.services.segmenter.data import Volume
from paperworks.shared.devices import device
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.inputs import InputRefParams, InputScope, resolve_input
from paperworks.shared.job_refs import artifact_sha, finished_job, job_artifact
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.shared.rpc.tensors import from_numpy, to_numpy
from pydantic import ValidationError

CACHE_SIZE = 8
INLINE_MAX_VOXELS = 128**3


MODELS = {  # what a SUCCEEDED job of each kind leaves for the jobs and calls built on it
    "train_segmenter": "segmenter.safetensors",
    "train_denoiser": "denoiser.safetensors",
    "fit_minor_params": "minor_params.json",
}


def request_volume(request, scope: InputScope) -> Volume:
    """The request's volume: `image_nifti` bytes, `image` tensor + `spacing`, or `source` (a NIfTI
    file: an upload, a job's artifact, an s3:// object, a server path); exactly one."""
    has_source = request.HasField("source")
    given = [bool(request.image_nifti), request.HasField("image"), has_source]
    if sum(given) != 1:
        raise InvalidArgument("image_nifti", "set exactly one of image_nifti, image and source")
    if given[0] or has_source:
        if request.spacing:
            raise InvalidArgument("spacing", "comes from the NIfTI header; leave it empty")
        if has_source:
            try:
                ref = InputRefParams.model_validate(
                    json_format.MessageToDict(request.source, preserving_proto_field_name=True))
            except ValidationError as exc:
                raise violations_from_pydantic(exc, "source.") from None
            field = "source"
            v = data.read_file(resolve_input(ref, scope, "segmenter", field), field)
        else:
            field = "image_nifti"
            v = data.read_nifti(request.image_nifti, field)
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

    def _built_on(self, tenant: str, refs, source_job_id: str = "") -> None:
        """Each named (job id, field, kind): the tenant's SUCCEEDED job of that kind, holding its
        model; `source_job_id`: a denoise job whose outputs are stored. Unnamed ids are left to the
        parameter check, which reports every missing field at once."""
        for job_id, field, kind in refs:
            if job_id:
                finished_job(self.rt.store, tenant, "segmenter", job_id, field, kind)
                artifact_sha(self.rt.store, job_id, MODELS[kind], field)
        if source_job_id:
            data.denoise_outputs(self.rt.store, tenant, source_job_id, "source_job_id")

    async def _submit(self, context, kind: str, request, refs=(), source_job_id: str = ""):
        await asyncio.to_thread(self._built_on, self.rt.tenant(context), refs, source_job_id)
        return await self.rt.submit(context, kind, request)

    @rpc_method
    async def SubmitFitMinorParams(self, request, context):
        job = await self._submit(context, "fit_minor_params", request)
        return segmenter_pb2.SubmitFitMinorParamsResponse(job=job)

    @rpc_method
    async def SubmitTrainSegmenter(self, request, context):
        refs = [(request.minor_job_id, "minor_job_id", "fit_minor_params")]
        job = await self._submit(context, "train_segmenter", request, refs)
        return segmenter_pb2.SubmitTrainSegmenterResponse(job=job)

    @rpc_method
    async def SubmitSegment(self, request, context):
        refs = [(request.model_job_id, "model_job_id", "train_segmenter")]
        job = await self._submit(context, "segment", request, refs, request.source_job_id)
        return segmenter_pb2.SubmitSegmentResponse(job=job)

    @rpc_method
    async def SubmitTrainDenoiser(self, request, context):
        job = await self._submit(context, "train_denoiser", request)
        return segmenter_pb2.SubmitTrainDenoiserResponse(job=job)

    @rpc_method
    async def SubmitDenoise(self, request, context):
        refs = [
            (request.model_job_id, "model_job_id", "train_denoiser"),
            (request.then_segment.model_job_id, "then_segment.model_job_id", "train_segmenter"),
        ]
        job = await self._submit(context, "denoise", request, refs)
        return segmenter_pb2.SubmitDenoiseResponse(job=job)

    def _model(self, tenant, job_id, kind, cls):
        raw, sha = job_artifact(
            self.rt.store, self.rt.artifacts, tenant, "segmenter", job_id, MODELS[kind], "model_job_id", kind
        )
        # on the device a job worker would use (PAPERWORKS_DEVICE, else cuda:0 where there is a GPU)
        return self.cache.get(sha, lambda: cls.from_bytes(raw, device()))

    def _segment(self, scope: InputScope, request):
        seg = self._model(scope.tenant, request.model_job_id, "train_segmenter", Segmenter)
        threshold = request.threshold if request.HasField("threshold") else 0.5
        if not 0 < threshold < 1:
            raise InvalidArgument("threshold", "must lie in (0, 1)")
        v = request_volume(request, scope)
        labels, minor = seg.segment(v.data, v.spacing, threshold)
        stats = [
            segmenter_pb2.StructureStats(**s)
            for s in structure_stats(labels, v.data, v.spacing, seg.structures)
        ]
        reply = segmenter_pb2.SegmentResponse(labels=from_numpy(labels), structures=stats,
                                              supernodes=minor.nodes)
        if not request.HasField("image"):  # NIfTI in, NIfTI out
            reply.labels_nifti = data.write_nifti(labels, v.spacing, v.affine)
        return reply

    def _denoise(self, scope: InputScope, request):
        den = self._model(scope.tenant, request.model_job_id, "train_denoiser", Denoiser)
        v = request_volume(request, scope)
        out = den.denoise(v.data).astype(np.float32)
        reply = segmenter_pb2.DenoiseResponse(image=from_numpy(out))
        if not request.HasField("image"):
            reply.image_nifti = data.write_nifti(out, v.spacing, v.affine)
        return reply

    @rpc_method
    async def Segment(self, request, context):
        return await asyncio.to_thread(self._segment, self.rt.inputs(context), request)

    @rpc_method
    async def Denoise(self, request, context):
        return await asyncio.to_thread(self._denoise, self.rt.inputs(context), request)
