"""GraphService: the thin gRPC edge. Submit* check the generator jobs a request builds on (the
tenant's SUCCEEDED train_generator jobs) and hand jobs to the runtime; Answer loads the tenant's
generator (cached by artifact hash, on this server's device), conditions on the graph once (cached
by graph digest: one generator forward per graph) and scores the answer options inline."""

from __future__ import annotations

import asyncio
import hashlib

import numpy as np
import torch
from paperworks.graph.v1 import graph_pb2, graph_pb2_grpc
from paperworks.services.graph import checkpoint, data, runs, world
from paperworks.services.graph.gara import batch_graphs
from paperworks.services.graph.gara.train import option_probabilities
from paperworks.services.graph.spec import AnswerParams
from paperworks.shared.devices import device
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.job_refs import finished_job, job_artifact
from paperworks.shared.rpc.convert import request_params
from paperworks.shared.rpc.model_cache import ModelCache
from paperworks.shared.rpc.runtime import ServiceRuntime
from paperworks.shared.rpc.status import rpc_method
from pydantic import ValidationError

CACHE_SIZE = 8
ADAPTER_CACHE_SIZE = 256
INLINE_MAX_NODES = 2_000


class GraphServicer(graph_pb2_grpc.GraphServiceServicer):
    def __init__(self, rt: ServiceRuntime):
        self.rt = rt
        self.models = ModelCache(CACHE_SIZE)
        self.adapters = ModelCache(ADAPTER_CACHE_SIZE)
        self.device = device()

    def _generator_job(self, tenant: str, job_id: str, field: str):
        return finished_job(self.rt.store, tenant, "graph", job_id, field, "train_generator")

    async def _check(self, context, job_ids: list[str], field: str) -> None:
        tenant = self.rt.tenant(context)
        for i, job_id in enumerate(job_ids):
            where = field if len(job_ids) == 1 and field == "generator_job_id" else f"{field}.{i}"
            await asyncio.to_thread(self._generator_job, tenant, job_id, where)

    @rpc_method
    async def SubmitTrainGenerator(self, request, context):
        return graph_pb2.SubmitTrainGeneratorResponse(
            job=await self.rt.submit(context, "train_generator", request)
        )

    @rpc_method
    async def SubmitGenerateAdapter(self, request, context):
        if request.generator_job_id:
            await self._check(context, [request.generator_job_id], "generator_job_id")
        return graph_pb2.SubmitGenerateAdapterResponse(
            job=await self.rt.submit(context, "generate_adapter", request)
        )

    @rpc_method
    async def SubmitEvaluate(self, request, context):
        if 0 < len(request.generator_job_ids) <= 8:
            await self._check(context, list(request.generator_job_ids), "generator_job_ids")
        return graph_pb2.SubmitEvaluateResponse(job=await self.rt.submit(context, "evaluate", request))

    def _model(self, tenant: str, scope, job_id: str):
        field = "generator_job_id"
        self._generator_job(tenant, job_id, field)
        store, artifacts = self.rt.store, self.rt.artifacts
        raw, sha = job_artifact(store, artifacts, tenant, "graph", job_id, checkpoint.GENERATOR, field)

        def load():
            settings = checkpoint.generator_settings(raw, field)
            lm_bytes = None
            if settings.get("lm", "tiny") == "tiny":
                lm_bytes, _ = job_artifact(
                    store, artifacts, tenant, "graph", job_id, checkpoint.BASE_LM, field
                )
            lm, tok = data.base_lm(scope, settings, lm_bytes, self.device, field)
            return checkpoint.generator_from_bytes(raw, lm, self.device, field), tok, lm

        return sha, *self.models.get(sha, load)

    def _answer(self, tenant: str, scope, params: AnswerParams) -> graph_pb2.AnswerResponse:
        graph, ids = data.load_graph(params.graph, scope)
        if graph.n > INLINE_MAX_NODES:
            raise InvalidArgument(
                "graph", f"at most {INLINE_MAX_NODES} nodes inline; submit generate_adapter"
            )
        if params.node not in ids:
            raise InvalidArgument("node", f"no node {params.node!r} in the graph (ids like {ids[0]!r})")
        sha, model, tok, lm = self._model(tenant, scope, params.generator_job_id)
        data.check_texts(graph, tok, lm.get_input_embeddings().embedding_dim)
        digest = graph.digest()

        def condition():
            x = runs.graph_features(lm, tok, graph).to(self.device)
            with torch.no_grad():
                return model.condition(batch_graphs([(x, graph.edge_index())]).to(self.device))

        key = hashlib.sha256(f"{sha}:{digest}".encode()).hexdigest()
        cond = self.adapters.get(key, condition) if model.arm != "static_lora" else None
        prompt, _ = graph.prompt(ids.index(params.node), np.random.default_rng(params.seed))
        probs = option_probabilities(
            model,
            cond,
            [tok.encode(prompt)],
            runs.options(tok),
            torch.zeros(1, dtype=torch.long),
            tok.pad_id,
            self.device,
        )[0]
        p = probs.double().cpu().numpy()
        return graph_pb2.AnswerResponse(
            answer=world.ROLES[int(p.argmax())],
            options=list(world.ROLES),
            probabilities=p.tolist(),
            prompt=prompt,
            graph_digest=digest,
        )

    @rpc_method
    async def Answer(self, request, context):
        tenant = self.rt.tenant(context)
        try:
            params = AnswerParams.model_validate(request_params(request, exclude=()))
        except ValidationError as exc:
            raise violations_from_pydantic(exc) from None
        scope = self.rt.inputs(context)
        return await asyncio.to_thread(self._answer, tenant, scope, params)
