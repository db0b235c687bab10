"""The urban jobs: thin handlers that load inputs, call the method modules, store artifacts.
The method's input errors (FieldError) become INVALID_ARGUMENT on their field. Everything runs on
the job's device (`ctx.device`): the encoder pretrains and embeds there, its forward passes under
bf16 autocast on a GPU (`paperworks.shared.devices.autocast`; the contrastive logits, backward
passes and optimizer steps stay float32), and the probes fit there in float32 (their scores are
what the jobs report)."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
from paperworks.services.urban import figures
from paperworks.services.urban.checkpoint import encoder_from_bytes, encoder_to_bytes, probe_to_bytes
from paperworks.services.urban.data import COORDINATES, Dataset, load_dataset
from paperworks.services.urban.evaluation import (
    default_subsets,
    evaluate,
    make_target,
    random_split,
    raw_coordinates,
)
from paperworks.services.urban.probes import Probe
from paperworks.services.urban.spec import EvaluateParams, FitTaskParams, PretrainParams, invalid_arguments
from paperworks.services.urban.urbanfusion.encoder import FeatureSet, UrbanEncoder
from paperworks.services.urban.urbanfusion.train import PretrainConfig, pretrain
from paperworks.shared.devices import autocast
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

PARQUET = "application/vnd.apache.parquet"


def _encoder(ctx: JobContext, job_id: str) -> UrbanEncoder:
    """The pretrained encoder, on the job's device."""
    data, _ = ctx.job_artifact("urban", job_id, "model.safetensors", "pretrain_job_id", kind="pretrain")
    return encoder_from_bytes(data).to(ctx.device, autocast)


def _parquet(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


def _restrict(fs: FeatureSet, names: list[str], field: str) -> FeatureSet:
    for k, name in enumerate(names):
        if name not in fs.names:
            raise InvalidArgument(f"{field}[{k}]", f"the encoder has no modality {name!r} "
                                                   f"(has: {', '.join(fs.names)})")
    return fs.restricted(set(names)) if names else fs


def _exclude_regions(dataset: Dataset, regions: list[str]) -> Dataset:
    known = set(dataset.regions)
    for k, region in enumerate(regions):
        if region not in known:
            raise InvalidArgument(f"exclude_regions[{k}]", f"no region {region!r} in the dataset")
    kept = ~np.isin(dataset.region, regions)
    if not kept.any():
        raise InvalidArgument("exclude_regions", "excludes every location")
    return dataset.take(kept)


@invalid_arguments()
def run_pretrain(params: PretrainParams, ctx: JobContext) -> dict:
    ctx.progress(0, params.steps, stage="loading", message="reading the dataset")
    dataset = load_dataset(params.dataset, ctx).select_modalities(params.modalities)
    dataset = _exclude_regions(dataset, params.exclude_regions)
    encoder = UrbanEncoder.create(dataset, params.extractors, params.embed_dim, params.layers, params.heads,
                                  params.seed)
    fs = encoder.features(dataset)
    config = PretrainConfig(steps=params.steps, batch_size=params.batch_size,
                            learning_rate=params.learning_rate,
                            reconstruction_weight=params.reconstruction_weight,
                            view_overlap=params.view_overlap, seed=params.seed)

    def on_step(step: int, losses: dict[str, float]) -> None:
        ctx.progress(step, params.steps, stage="pretraining",
                     message=f"loss {losses['loss']:.3f} (contrastive {losses['contrastive']:.3f}, "
                             f"reconstruction {losses['reconstruction']:.3f})")

    history = pretrain(encoder, fs, config, on_step, device=ctx.device, autocast=autocast)
    model = ctx.put_artifact("model.safetensors", encoder_to_bytes(encoder), "application/octet-stream")
    ctx.announce_model(model, f"location encoder, {encoder.dim}-d embeddings")
    embedding = encoder.embed(fs)
    frame = pd.DataFrame({"id": fs.ids, "region": fs.region, "lat": fs.lat, "lon": fs.lon})
    frame = pd.concat([frame, pd.DataFrame(embedding, columns=[f"e{i}" for i in range(encoder.dim)])], axis=1)
    ctx.put_artifact("embeddings.parquet", _parquet(frame), PARQUET)
    png = figures.embedding_map(fs.lat, fs.lon, fs.region, embedding)
    ctx.put_artifact("embedding_map.png", png, "image/png")
    tail = history[-max(1, len(history) // 10):]
    return {
        "locations": len(fs), "regions": sorted(set(fs.region.tolist())), "modalities": list(fs.names),
        "embed_dim": encoder.dim, "steps": len(history),
        "loss": float(np.mean([h["loss"] for h in tail])),
        "contrastive": float(np.mean([h["contrastive"] for h in tail])),
        "reconstruction": float(np.mean([h["reconstruction"] for h in tail])),
        "first_loss": history[0]["loss"],
    }


@invalid_arguments()
def run_fit_task(params: FitTaskParams, ctx: JobContext) -> dict:
    encoder = _encoder(ctx, params.pretrain_job_id)
    dataset = load_dataset(params.dataset, ctx)
    target = make_target(params.target, dataset.targets, params.task_type, "target")
    fs = _restrict(encoder.features(dataset), params.modalities, "modalities")
    usable = target.labeled & fs.present.any(axis=1)
    rows = np.flatnonzero(usable)
    if params.holdout_region:
        if params.holdout_region not in set(fs.region[rows].tolist()):
            raise InvalidArgument("holdout_region",
                                  f"no labeled location in region {params.holdout_region!r}")
        inside = fs.region[rows] == params.holdout_region
        train, test = rows[~inside], rows[inside]
        if len(train) < 10:
            raise InvalidArgument("holdout_region", "leaves fewer than 10 labeled locations to fit on")
    else:
        train, test = random_split(rows, params.test_fraction, params.seed)
    ctx.progress(1, 3, stage="embedding", message=f"{len(rows)} labeled locations")
    embedding = np.zeros((len(fs), encoder.dim), np.float32)
    embedding[usable] = encoder.embed(fs.take(usable))
    variants = {False: embedding, True: np.hstack([embedding, raw_coordinates(fs)])}
    probes, scores = {}, {}
    for appended, x in variants.items():
        probe = Probe(target.task_type, params.probe, x.shape[1], target.classes, params.seed, ctx.device)
        probes[appended] = probe.fit(x[train], target.y[train])
        key = "with_coordinates" if appended else "without_coordinates"
        scores[key] = probe.score(x[test], target.y[test])
    ctx.progress(2, 3, stage="fitting", message=f"test {target.metric} {scores}")
    served, x = probes[params.append_coordinates], variants[params.append_coordinates]
    extra = {"pretrain_job_id": params.pretrain_job_id, "target": target.name,
             "append_coordinates": params.append_coordinates, "modalities": params.modalities}
    ctx.put_artifact("probe.safetensors", probe_to_bytes(served, extra), "application/octet-stream")
    split = np.full(len(fs), "", dtype=object)
    split[train], split[test] = "train", "test"
    pred = served.predict(x[rows])
    labels = (lambda v: np.array(target.classes)[v]) if target.classes else (lambda v: v)
    frame = pd.DataFrame({"id": fs.ids[rows], "region": fs.region[rows], "lat": fs.lat[rows],
                          "lon": fs.lon[rows], "split": split[rows], "target": labels(target.y[rows]),
                          "prediction": labels(pred)})
    ctx.put_artifact("predictions.parquet", _parquet(frame), PARQUET)
    shown = test if params.holdout_region else rows[fs.region[rows] == fs.region[test[0]]]
    ctx.put_artifact("prediction_map.png", figures.prediction_map(
        fs.lat[shown], fs.lon[shown], target.y[shown], served.predict(x[shown]),
        f"{target.name} in {fs.region[shown[0]]}", categorical=bool(target.classes)), "image/png")
    ctx.progress(3, 3, stage="done", message="probe stored")
    return {"target": target.name, "task_type": target.task_type, "metric": target.metric,
            "probe": params.probe, "served": "with_coordinates" if params.append_coordinates
            else "without_coordinates", "test": scores, "train_locations": int(len(train)),
            "test_locations": int(len(test)), "classes": target.classes}


@invalid_arguments()
def run_evaluate(params: EvaluateParams, ctx: JobContext) -> dict:
    encoder = _encoder(ctx, params.pretrain_job_id)
    dataset = load_dataset(params.dataset, ctx)
    tasks = [(t.target, t.task_type, f"tasks[{k}].target") for k, t in enumerate(params.tasks)] or [
        (str(c), "", "tasks") for c in dataset.targets.columns]
    if not tasks:
        raise InvalidArgument("tasks", "the dataset has no targets table")
    targets = [make_target(name, dataset.targets, task_type, field) for name, task_type, field in tasks]
    fs = encoder.features(dataset)
    subsets = []
    for k, subset in enumerate(params.subsets):
        _restrict(fs, subset.modalities, f"subsets[{k}].modalities")
        subsets.append(frozenset(subset.modalities))
    subsets = subsets or default_subsets(fs.names)

    def on_task(i: int, total: int, name: str) -> None:
        ctx.progress(i, total, stage="evaluating", message=f"{name} done")

    report = evaluate(encoder, fs, targets, params.probe, subsets, params.leave_one_region_out,
                      params.test_fraction, params.seed, on_task, ctx.device)
    ctx.put_json("evaluation.json", {"probe": params.probe, "tasks": report})
    summary = {}
    for name, entry in report.items():
        row = {k: entry[k] for k in ("metric", "embedding", "embedding+coordinates", "concatenated",
                                     "concatenated+coordinates")}
        row[COORDINATES] = entry["subsets"].get(COORDINATES)
        if "leave_one_region_out" in entry:
            held = entry["leave_one_region_out"].values()
            row["held_out_region_mean"] = {k: float(np.mean([h[k] for h in held])) if held else None
                                           for k in ("embedding", "concatenated",
                                                     "concatenated+coordinates")}
        summary[name] = row
    return {"probe": params.probe, "tasks": summary}
