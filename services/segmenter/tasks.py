"""The segmenter jobs: thin handlers that load volumes (`data`), call the methods (`semir`, `wne`)
on the job's device (`ctx.device`: the GINE, the denoiser and their inputs; the minor itself is
built on the CPU), store artifacts and models (`checkpoint`)."""

from __future__ import annotations

import json

import numpy as np
import torch
from paperworks.services.segmenter import data, wne
from paperworks.services.segmenter.checkpoint import Denoiser, Segmenter, structure_stats
from paperworks.services.segmenter.semir import gnn, minor, search
from paperworks.services.segmenter.spec import (
    DenoiseParams,
    FitMinorParamsParams,
    SegmentParams,
    TrainDenoiserParams,
    TrainSegmenterParams,
)
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

NIFTI = "application/gzip"
OCTET = "application/octet-stream"


def _labelled(params, ctx, field="dataset", limit=0):
    cases, names = data.load_cases(params, ctx, field)
    cases = [(i, lab) for i, lab in cases if lab is not None][: limit or None]
    if not cases:
        raise InvalidArgument(field, "no case has a label volume")
    return cases, names


def _minor_params(ctx, job_id: str) -> minor.MinorParams:
    raw, _ = ctx.job_artifact(
        "segmenter", job_id, "minor_params.json", "minor_job_id", kind="fit_minor_params"
    )
    return minor.MinorParams(**json.loads(raw)["params"])


def run_fit_minor_params(params: FitMinorParamsParams, ctx: JobContext) -> dict:
    ctx.progress(0, params.trials, stage="loading", message="reading the few-shot volumes")
    cases, names = _labelled(params.dataset, ctx, limit=params.max_volumes)
    pairs = [(i.data, lab.data) for i, lab in cases]
    spacings = [i.spacing for i, _ in cases]

    def on_trial(k, score, best):
        ctx.progress(
            k,
            params.trials,
            stage="searching",
            message=f"trial {k}: boundary Dice {score:.3f} (best {best:.3f})",
        )

    best, history = search.search(pairs, params.trials, params.optimizer, params.seed, spacings, on_trial)
    hand = search.hand_set([p[0] for p in pairs])
    score = max(h["score"] for h in history)
    minors = [minor.build_minor(i, best, sp) for (i, _), sp in zip(pairs, spacings, strict=False)]
    oracle = [minor.oracle_dice(m, lab, names) for m, (_, lab) in zip(minors, pairs, strict=False)]
    summary = {
        "params": best.as_dict(),
        "boundary_dice": score,
        "hand_set_boundary_dice": search.objective(hand, pairs, spacings),
        # the paper-style manual vector (deletion of air and body, psi 0.05 R): the claim-2 baseline
        "manual_boundary_dice": search.objective(search.manual([p[0] for p in pairs]), pairs, spacings),
        "optimizer": params.optimizer,
        "trials": len(history),
        "volumes": len(pairs),
        "supernodes_mean": float(np.mean([m.nodes for m in minors])),
        "oracle_dice": {names.get(k, str(k)): float(np.mean([o[k] for o in oracle])) for k in names},
        "structures": {str(k): v for k, v in names.items()},
    }
    ctx.put_json("minor_params.json", summary)
    ctx.put_json("trials.json", [{"params": h["params"], "score": h["score"]} for h in history])
    return summary


def _structures(params: TrainSegmenterParams, names: dict[int, str]) -> list[int]:
    """The label values to learn, ascending: `structures` and `structure_names` (dataset.json's
    names); neither given: every label of the dataset."""
    by_name = {name: value for value, name in names.items()}
    chosen = []
    for k, s in enumerate(params.structures):
        if s not in names:
            raise InvalidArgument(f"structures[{k}]", f"the dataset has no label {s} (has {sorted(names)})")
        chosen.append(s)
    for k, name in enumerate(params.structure_names):
        if name not in by_name:
            raise InvalidArgument(f"structure_names[{k}]", f"the dataset has no label {name!r} "
                                  f"(has {', '.join(sorted(by_name))})")
        chosen.append(by_name[name])
    return sorted(set(chosen)) or sorted(names)


def run_train_segmenter(params: TrainSegmenterParams, ctx: JobContext) -> dict:
    mp = _minor_params(ctx, params.minor_job_id)
    cases, names = _labelled(params.dataset, ctx)
    structures = _structures(params, names)
    minors = [minor.build_minor(i.data, mp, i.spacing) for i, _ in cases]
    total = params.steps * len(structures)
    models, train_dice = {}, {}
    for j, s in enumerate(structures):

        def on_step(step, loss, j=j, s=s):
            ctx.progress(
                j * params.steps + step, total, stage=f"training {names[s]}", message=f"loss {loss:.4f}"
            )

        torch.set_num_threads(1)
        models[s] = gnn.train_structure(
            minors,
            [lab.data == s for _, lab in cases],
            params.steps,
            params.hidden,
            params.layers,
            params.learning_rate,
            params.seed,
            on_step,
            device=ctx.device,
        )
        train_dice[names[s]] = float(
            np.mean(
                [
                    minor.dice(m.lift(gnn.predict(models[s], m) > 0.5, False), lab.data == s)
                    for m, (_, lab) in zip(minors, cases, strict=False)
                ]
            )
        )
    seg = Segmenter(mp, {s: names[s] for s in structures}, models)
    model = ctx.put_artifact("segmenter.safetensors", seg.to_bytes(), OCTET)
    ctx.announce_model(model, "segmenter of " + ", ".join(names[s] for s in structures))
    return {
        "structures": {str(s): names[s] for s in structures},
        "volumes": len(cases),
        "supernodes_mean": float(np.mean([m.nodes for m in minors])),
        "train_dice": train_dice,
        "minor_params": mp.as_dict(),
    }


def _segmenter(ctx, job_id: str) -> Segmenter:
    raw, _ = ctx.job_artifact(
        "segmenter", job_id, "segmenter.safetensors", "model_job_id", kind="train_segmenter"
    )
    return Segmenter.from_bytes(raw, ctx.device)


def _volumes(params: SegmentParams | DenoiseParams, ctx: JobContext) -> list:
    """[(image, labels | None)] from the job's one input: a dataset, `image` or `images`."""
    if params.dataset is not None:
        return data.load_cases(params.dataset, ctx)[0]
    if params.image is not None:
        return [(v, None) for v in data.load_volumes(params.image, ctx)]
    return [(v, None) for v in data.load_images(params.images, ctx)]


def run_segment(params: SegmentParams, ctx: JobContext) -> dict:
    seg = _segmenter(ctx, params.model_job_id)
    if not params.source_job_id:
        inputs = _volumes(params, ctx)
    else:
        inputs = [(v, None) for v in data.denoised_volumes(ctx, params.source_job_id, "source_job_id")]
    report = []
    for k, (image, labels) in enumerate(inputs):
        out, m = seg.segment(image.data, image.spacing, params.threshold)
        ctx.put_artifact(
            f"{image.name}_seg.nii.gz", data.write_nifti(out, image.spacing, image.affine), NIFTI
        )
        entry = {
            "case": image.name,
            "shape": list(image.data.shape),
            "supernodes": m.nodes,
            "structures": structure_stats(out, image.data, image.spacing, seg.structures),
        }
        if labels is not None:
            entry["dice"] = {
                name: minor.dice(out == s, labels.data == s) for s, name in seg.structures.items()
            }
        report.append(entry)
        ctx.progress(k + 1, len(inputs), stage="segmenting", message=f"{image.name}: {m.nodes} supernodes")
    ctx.put_json("statistics.json", report)
    result = {
        "volumes": len(report),
        "cases": [r["case"] for r in report],
        "structures": {r["case"]: {s["name"]: s["voxels"] for s in r["structures"]} for r in report},
    }
    if report and "dice" in report[0]:
        result["dice_mean"] = {
            n: float(np.mean([r["dice"][n] for r in report])) for n in seg.structures.values()
        }
    return result


def _slices(cases, per_volume: int = 8) -> np.ndarray:
    out = []
    for image, _ in cases:
        d = image.data if image.data.ndim == 3 else image.data[None]
        idx = np.linspace(d.shape[0] // 4, max(d.shape[0] * 3 // 4 - 1, d.shape[0] // 4), per_volume).astype(
            int
        )
        out.extend(d[np.unique(idx)])
    shapes = {s.shape for s in out}
    if len(shapes) != 1:
        raise InvalidArgument("dataset", f"training slices must share one shape (found {sorted(shapes)})")
    return np.stack(out).astype(np.float32)


def run_train_denoiser(params: TrainDenoiserParams, ctx: JobContext) -> dict:
    cases, _ = data.load_cases(params.dataset, ctx)
    if len(cases) < 2:
        raise InvalidArgument("dataset", "needs at least 2 volumes (one is held out for evaluation)")
    held = max(1, len(cases) // 5)
    train, test = _slices(cases[:-held]), _slices(cases[-held:])
    torch.set_num_threads(1)

    def on_step(step, loss):
        ctx.progress(step, params.steps + 1, stage="training", message=f"mse {loss:.5f}")

    model = wne.train_denoiser(
        train,
        params.noise_sigma,
        params.backbone,
        params.wrapper,
        params.steps,
        params.batch_size,
        params.learning_rate,
        params.seed,
        on_step=on_step,
        device=ctx.device,
    )
    rng = np.random.default_rng(params.seed + 1)
    noisy = test + rng.normal(0, params.noise_sigma, test.shape).astype(np.float32)
    peak = float(test.max() - test.min()) or 1.0
    den = np.stack([wne.denoise_volume(model, n) for n in noisy])
    y = torch.from_numpy(noisy[:8, None]).to(ctx.device)
    defect = float(np.mean([wne.ne_defect(model, y, a, b) for a, b in ((2.0, 0.3), (0.5, -0.2))]))
    stored = ctx.put_artifact(
        "denoiser.safetensors", Denoiser(model, params.backbone, params.noise_sigma).to_bytes(), OCTET
    )
    ctx.announce_model(
        stored, f"{params.wrapper} {params.backbone} denoiser, noise sigma {params.noise_sigma:g}"
    )
    ctx.progress(params.steps + 1, params.steps + 1, stage="done", message=f"defect {defect:.2e}")
    return {
        "backbone": params.backbone,
        "wrapper": params.wrapper,
        "noise_sigma": params.noise_sigma,
        "psnr_noisy": wne.psnr(noisy, test, peak),
        "psnr_denoised": wne.psnr(den, test, peak),
        "ne_defect": defect,
        "train_slices": int(len(train)),
        "test_slices": int(len(test)),
    }


def run_denoise(params: DenoiseParams, ctx: JobContext) -> dict:
    raw, _ = ctx.job_artifact(
        "segmenter", params.model_job_id, "denoiser.safetensors", "model_job_id", kind="train_denoiser"
    )
    den = Denoiser.from_bytes(raw, ctx.device)
    if params.then_segment is not None:  # fail before the work if the chained model is unusable
        ctx.finished_job(
            "segmenter", params.then_segment.model_job_id, "then_segment.model_job_id", kind="train_segmenter"
        )
    inputs = [image for image, _ in _volumes(params, ctx)]
    names = []
    for k, image in enumerate(inputs):
        out = den.denoise(image.data)
        ctx.put_artifact(
            f"{image.name}_denoised.nii.gz",
            data.write_nifti(out.astype(np.float32), image.spacing, image.affine),
            NIFTI,
        )
        names.append(image.name)
        ctx.progress(k + 1, len(inputs), stage="denoising", message=image.name)
    ctx.put_json(data.MANIFEST, {"volumes": names})
    result = {"volumes": len(names), "cases": names}
    if params.then_segment is not None:
        follow = {
            "model_job_id": params.then_segment.model_job_id,
            "source_job_id": ctx.job_id,
            "threshold": params.then_segment.threshold,
        }
        job = ctx.submit("segmenter", "segment", follow, f"chain:{ctx.job_id}:segment")
        result["segment_job_id"] = job.id
    return result
