"""UrbanService: the thin gRPC edge. Submit* check the pretrain job a request builds on (the tenant's,
a pretrain, SUCCEEDED) and hand jobs to the runtime; Embed and Predict load the tenant's pretrained
encoder / fitted probe (cached by artifact hash, on this server's device: `shared.devices.device`)
and answer inline."""
from __future__ import annotations

import asyncio

import numpy as np
from paperworks.services.urban.checkpoint import encoder_from_bytes, probe_from_bytes
from paperworks.services.urban.data import feature_set, used_modalities
from paperworks.services.urban.probes import Probe
from paperworks.services.urban.spec import invalid_arguments
from paperworks.services.urban.urbanfusion.encoder import UrbanEncoder
from paperworks.shared.devices import autocast, device
from paperworks.shared.job_refs import finished_job, job_artifact
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from paperworks.shared.rpc.tensors import from_numpy
from paperworks.urban.v1 import urban_pb2, urban_pb2_grpc

CACHE_SIZE = 8


class UrbanServicer(urban_pb2_grpc.UrbanServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self.cache = ModelCache(CACHE_SIZE)
        self.device = device()  # where the cached encoders and probes live

    @rpc_method
    async def SubmitPretrain(self, request, context):
        return urban_pb2.SubmitPretrainResponse(job=await self.rt.submit(context, "pretrain", request))

    async def _check_pretrain_job(self, context, job_id: str) -> None:
        """Refused at submit, not in the worker: a job id that is not this tenant's SUCCEEDED pretrain
        (an empty one is left to the parameters' check, which names every missing field at once)."""
        if job_id:
            await asyncio.to_thread(finished_job, self.rt.store, self.rt.tenant(context), "urban", job_id,
                                    "pretrain_job_id", kind="pretrain")

    @rpc_method
    async def SubmitFitTask(self, request, context):
        await self._check_pretrain_job(context, request.pretrain_job_id)
        return urban_pb2.SubmitFitTaskResponse(job=await self.rt.submit(context, "fit_task", request))

    @rpc_method
    async def SubmitEvaluate(self, request, context):
        await self._check_pretrain_job(context, request.pretrain_job_id)
        return urban_pb2.SubmitEvaluateResponse(job=await self.rt.submit(context, "evaluate", request))

    def _encoder(self, tenant: str, job_id: str, field: str) -> UrbanEncoder:
        data, sha = job_artifact(self.rt.store, self.rt.artifacts, tenant, "urban", job_id,
                                 "model.safetensors", field, kind="pretrain")
        return self.cache.get(sha, lambda: encoder_from_bytes(data).to(self.device, autocast))

    def _probe(self, tenant: str, job_id: str) -> tuple[Probe, dict]:
        data, sha = job_artifact(self.rt.store, self.rt.artifacts, tenant, "urban", job_id,
                                 "probe.safetensors", "task_job_id", kind="fit_task")
        return self.cache.get(sha, lambda: probe_from_bytes(data, self.device))

    def _embed(self, tenant: str, request) -> urban_pb2.EmbedResponse:
        with invalid_arguments():
            encoder = self._encoder(tenant, request.pretrain_job_id, "pretrain_job_id")
            fs = feature_set(encoder, request.locations, request.use_modalities)
            embeddings = encoder.embed(fs)
        return urban_pb2.EmbedResponse(embeddings=from_numpy(embeddings.astype(np.float32)),
                                       ids=list(fs.ids), used_modalities=used_modalities(fs))

    def _predict(self, tenant: str, request) -> urban_pb2.PredictResponse:
        probe, extra = self._probe(tenant, request.task_job_id)
        with invalid_arguments():
            encoder = self._encoder(tenant, extra["pretrain_job_id"], "task_job_id")
            fs = feature_set(encoder, request.locations, request.use_modalities or extra["modalities"])
            x = encoder.embed(fs)
        if extra["append_coordinates"]:
            x = np.hstack([x, np.stack([fs.lat, fs.lon], axis=1).astype(np.float32)])
        reply = urban_pb2.PredictResponse(target=extra["target"], task_type=probe.task_type, ids=list(fs.ids))
        if probe.task_type == "regression":
            reply.values.extend(probe.predict(x).astype(float).tolist())
        else:
            reply.classes.extend(probe.classes)
            reply.labels.extend(np.array(probe.classes)[probe.predict(x)].tolist())
            reply.probabilities.CopyFrom(from_numpy(probe.probabilities(x).astype(np.float32)))
        return reply

    @rpc_method
    async def Embed(self, request, context):
        return await asyncio.to_thread(self._embed, self.rt.tenant(context), request)

    @rpc_method
    async def Predict(self, request, context):
        return await asyncio.to_thread(self._predict, self.rt.tenant(context), request)
