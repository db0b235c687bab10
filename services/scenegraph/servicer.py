"""ScenegraphService: the thin gRPC edge. Submit* check the train job a request builds on (the
tenant's, a train job, SUCCEEDED) and hand jobs to the runtime; Predict loads the tenant's trained
generator (cached by artifact hash, on this server's device: `shared.devices.device`) and answers
one image inline, given as bytes or as an input reference (an upload, an artifact, s3, a path)."""
from __future__ import annotations

import asyncio

import numpy as np
from google.protobuf import json_format
from paperworks.scenegraph.v1 import scenegraph_pb2, scenegraph_pb2_grpc
from paperworks.services.scenegraph import checkpoint
from paperworks.services.scenegraph.data.scenes_json import check_box, decode_image, resize
from paperworks.services.scenegraph.generator import SceneGraphGenerator
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.shared.devices import autocast, device
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.inputs import InputRefParams, InputScope, resolve_input
from paperworks.shared.job_refs import finished_job, job_artifact
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from pydantic import ValidationError

CACHE_SIZE = 8
MAX_TOP_K = 1000
DEFAULT_TOP_K = 20


def given_objects(request, gen: SceneGraphGenerator, width: int, height: int
                  ) -> tuple[str, np.ndarray, np.ndarray]:
    """The request's boxes (image pixels) and labels, and the mode they imply: all labelled -> predcls,
    none labelled -> sgcls (the box classifier labels them), no boxes -> sgdet."""
    if not request.boxes:
        return "sgdet", np.zeros((0, 4), np.float32), np.zeros(0, np.int64)
    if len(request.boxes) > gen.cfg.max_objects:
        raise InvalidArgument("boxes", f"at most {gen.cfg.max_objects} boxes (the model's max_objects)")
    labelled = [bool(b.label) for b in request.boxes]
    if any(labelled) and not all(labelled):
        raise InvalidArgument("boxes", "label every box (PredCls) or none (SGCls), not some")
    boxes, labels = [], []
    for i, b in enumerate(request.boxes):
        boxes.append(check_box([b.x1, b.y1, b.x2, b.y2], width, height, f"boxes[{i}]"))
        if b.label and b.label not in gen.vocab.classes:
            raise InvalidArgument(f"boxes[{i}].label", f"unknown class {b.label!r} "
                                                       f"(known: {', '.join(gen.vocab.classes)})")
        labels.append(gen.vocab.class_index(b.label) if b.label else 0)
    return ("predcls" if all(labelled) else "sgcls"), np.stack(boxes), np.array(labels, np.int64)


def request_image(request, scope: InputScope | None) -> tuple[bytes, str]:
    """The request's image file, (bytes, the field that gave it): `image` or `source`, exactly one."""
    if request.HasField("source") == bool(request.image):
        raise InvalidArgument("image", "set exactly one of image (a PNG or JPEG file's bytes) and source")
    if request.image:
        return request.image, "image"
    try:
        ref = InputRefParams.model_validate(json_format.MessageToDict(request.source,
                                                                      preserving_proto_field_name=True))
    except ValidationError as exc:
        raise violations_from_pydantic(exc, "source.") from None
    path = resolve_input(ref, scope, "scenegraph", "source")
    if not path.is_file():
        raise InvalidArgument("source", "is not a file: give a PNG or JPEG image")
    return path.read_bytes(), "source"


def predict_one(gen: SceneGraphGenerator, request, scope: InputScope | None = None
                ) -> scenegraph_pb2.PredictResponse:
    """`scope`: whose inputs `request.source` may name (the caller's)."""
    top_k = request.top_k if request.HasField("top_k") else DEFAULT_TOP_K
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgument("top_k", f"must be 1..{MAX_TOP_K} (unset means {DEFAULT_TOP_K})")
    image = decode_image(*request_image(request, scope))
    width, height = image.size
    mode, boxes, labels = given_objects(request, gen, width, height)
    pixels, scaled = resize(image, boxes, gen.cfg.image_size)
    scale = np.array([gen.cfg.image_size / width, gen.cfg.image_size / height] * 2, np.float32)
    sample = Sample(pixels, scaled, labels, np.zeros((0, 3), np.int64))
    graph = gen.predict([sample], mode, top_k)[0]
    reply = scenegraph_pb2.PredictResponse(mode=mode)
    for i, (box, label, score) in enumerate(zip(graph.boxes, graph.labels, graph.scores, strict=True)):
        x1, y1, x2, y2 = (box / scale).tolist()
        reply.objects.append(scenegraph_pb2.DetectedObject(
            index=i, box=scenegraph_pb2.Box(x1=x1, y1=y1, x2=x2, y2=y2, label=label), score=float(score)))
    for t in graph.triplets:
        reply.triplets.append(scenegraph_pb2.Triplet(
            subject=t.subject, predicate=t.predicate, object=t.object, score=t.score, geometric=t.geometric))
    return reply


class ScenegraphServicer(scenegraph_pb2_grpc.ScenegraphServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self.cache = ModelCache(CACHE_SIZE)
        self.device = device()  # where the cached generators live

    @rpc_method
    async def SubmitTrain(self, request, context):
        return scenegraph_pb2.SubmitTrainResponse(job=await self.rt.submit(context, "train", request))

    async def _check_train_job(self, context, job_id: str) -> None:
        """Refused at submit, not in the worker: a job id that is not this tenant's SUCCEEDED train job
        (an empty one is left to the parameters' check, which names every missing field at once)."""
        if job_id:
            await asyncio.to_thread(finished_job, self.rt.store, self.rt.tenant(context), "scenegraph",
                                    job_id, "train_job_id", kind="train")

    @rpc_method
    async def SubmitEvaluate(self, request, context):
        await self._check_train_job(context, request.train_job_id)
        return scenegraph_pb2.SubmitEvaluateResponse(job=await self.rt.submit(context, "evaluate", request))

    @rpc_method
    async def SubmitPredict(self, request, context):
        await self._check_train_job(context, request.train_job_id)
        return scenegraph_pb2.SubmitPredictResponse(job=await self.rt.submit(context, "predict", request))

    def _predict(self, scope: InputScope, request) -> scenegraph_pb2.PredictResponse:
        data, sha = job_artifact(self.rt.store, self.rt.artifacts, scope.tenant, "scenegraph",
                                 request.train_job_id, checkpoint.MODEL_FILE, "train_job_id", kind="train")
        gen = self.cache.get(sha, lambda: checkpoint.load(data, self.device, autocast))
        return predict_one(gen, request, scope)

    @rpc_method
    async def Predict(self, request, context):
        return await asyncio.to_thread(self._predict, self.rt.inputs(context), request)
