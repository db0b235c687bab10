"""The scenegraph jobs: thin handlers that load inputs, call the method modules, store artifacts.
Everything runs on the job's device (`ctx.device`): the generator trains there in float32, and
evaluates and predicts there with the detector's inference pass under bf16 autocast on a GPU
(`paperworks.shared.devices.autocast`)."""
from __future__ import annotations

import re

from paperworks.services.scenegraph import checkpoint
from paperworks.services.scenegraph.data import check_vocabulary, load_dataset
from paperworks.services.scenegraph.dsnet import DSNetConfig
from paperworks.services.scenegraph.figures import draw_graph
from paperworks.services.scenegraph.generator import SceneGraphGenerator, TrainConfig
from paperworks.services.scenegraph.relation_model import RelationConfig
from paperworks.services.scenegraph.spec import EvaluateParams, PredictParams, TrainParams
from paperworks.shared.devices import autocast
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

KS = (20, 50, 100)


def _generator(ctx: JobContext, job_id: str) -> SceneGraphGenerator:
    data, _ = ctx.job_artifact("scenegraph", job_id, checkpoint.MODEL_FILE, "train_job_id", kind="train")
    return checkpoint.load(data, ctx.device, autocast)


def _headline(metrics: dict) -> dict:
    return {k: round(metrics[k], 4) for k in [f"{m}@{k}" for m in ("R", "ngR", "mR") for k in KS]}


def run_train(params: TrainParams, ctx: JobContext) -> dict:
    total = params.detector_epochs + params.relation_epochs
    ctx.progress(0, total, stage="loading", message="reading the dataset")
    vocab, samples = load_dataset(params.dataset, params.image_size, ctx)
    if not any(len(s.relations) for s in samples):
        raise InvalidArgument("dataset", "no image has a relation to learn from")
    if params.depth_order and not (vocab.depth_order or any(s.depth is not None for s in samples)):
        raise InvalidArgument("depth_order", "the dataset annotates no depth order: give its objects a "
                                             "depth, or name its depth_order predicates")
    cfg = TrainConfig(
        relation=RelationConfig(base=params.base, head=params.head,
                                dsnet=DSNetConfig(**params.dsnet.model_dump())),
        image_size=params.image_size, detector_epochs=params.detector_epochs,
        relation_epochs=params.relation_epochs, max_objects=params.max_objects,
        depth_order=params.depth_order, seed=params.seed)
    history: dict[str, list[float]] = {"detector": [], "relation": []}

    def progress(stage: str, step: int, steps: int, loss: float) -> None:
        history[stage].append(round(loss, 5))
        done = step + (params.detector_epochs if stage == "relation" else 0)
        ctx.progress(done, total, stage=stage, message=f"epoch {step}/{steps} loss {loss:.4f}")

    gen = SceneGraphGenerator.train(samples, vocab, cfg, progress, device=ctx.device)
    model = ctx.put_artifact(checkpoint.MODEL_FILE, checkpoint.save(gen), "application/octet-stream")
    ctx.announce_model(model, f"{params.base} scene-graph generator with the {params.head} predicate head")
    frequencies = {vocab.predicate_name(r): int(n) for r, n in enumerate(gen.train_frequencies) if r}
    ctx.put_json("training.json", {"config": cfg.model_dump(), "losses": history,
                                   "predicate_frequencies": frequencies, "vocabulary": vocab.model_dump()})
    return {"images": len(samples), "relations": int(sum(len(s.relations) for s in samples)),
            "base": params.base, "head": params.head, "detector_loss": history["detector"][-1],
            "relation_loss": history["relation"][-1], "first_relation_loss": history["relation"][0]}


def run_evaluate(params: EvaluateParams, ctx: JobContext) -> dict:
    gen = _generator(ctx, params.train_job_id)
    ctx.progress(0, 2, stage="loading", message="reading the dataset")
    vocab, samples = load_dataset(params.dataset, gen.cfg.image_size, ctx)
    check_vocabulary(gen.vocab, vocab)
    modes = tuple(dict.fromkeys(params.modes)) or ("predcls", "sgcls", "sgdet")
    ctx.progress(1, 2, stage="evaluating", message=", ".join(modes))
    metrics = gen.evaluate(samples, modes)
    ctx.put_json("evaluation.json", metrics)
    ctx.progress(2, 2, stage="done")
    return {"images": len(samples), "modes": {m: _headline(v) for m, v in metrics.items()},
            "mR@100_non_geometric": {m: round(v["mR@100_non_geometric"], 4) for m, v in metrics.items()}}


def run_predict(params: PredictParams, ctx: JobContext) -> dict:
    gen = _generator(ctx, params.train_job_id)
    vocab, samples = load_dataset(params.dataset, gen.cfg.image_size, ctx)
    check_vocabulary(gen.vocab, vocab)
    graphs = []
    for start in range(0, len(samples), 64):
        chunk = samples[start:start + 64]
        graphs += gen.predict(chunk, "sgdet", params.top_k)
        ctx.progress(min(start + 64, len(samples)), len(samples), stage="predicting")
    out = []
    for k, (sample, graph) in enumerate(zip(samples, graphs, strict=True)):
        objects = zip(graph.boxes, graph.labels, graph.scores, strict=True)
        out.append({"id": sample.image_id, "objects": [
            {"index": i, "box": [round(float(v), 2) for v in box], "label": label,
             "score": round(float(s), 4)}
            for i, (box, label, s) in enumerate(objects)],
            "triplets": [{"subject": t.subject, "predicate": t.predicate, "object": t.object,
                          "score": round(t.score, 5), "geometric": t.geometric} for t in graph.triplets]})
        if k < params.max_drawings:
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", sample.image_id or str(k))
            ctx.put_artifact(f"{name}.png", draw_graph(sample.image, graph), "image/png")
    ctx.put_json("scene_graphs.json", {"mode": "sgdet", "image_size": gen.cfg.image_size, "images": out})
    return {"images": len(out), "triplets": sum(len(g["triplets"]) for g in out),
            "drawn": min(len(out), params.max_drawings)}
