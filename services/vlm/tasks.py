"""The vlm jobs: thin handlers that generate or load inputs (`data`), call the methods (`tinyvlm`,
`following`, `cfpo`) on the job's device (`ctx.device`; bf16 autocast for supervised training on a
GPU, float32 for audits and RL, whose entropies and ratios are the measurement), and store
artifacts and models (`checkpoint`)."""

from __future__ import annotations

import io
import json

import numpy as np
from paperworks.services.vlm import checkpoint, data, figures
from paperworks.services.vlm.cfpo import rl
from paperworks.services.vlm.cfpo import task as vqa
from paperworks.services.vlm.following import audit, conflicts, steer
from paperworks.services.vlm.spec import (
    AuditParams,
    BuildConflictSetParams,
    PretrainParams,
    SteerParams,
    TrainRLParams,
)
from paperworks.services.vlm.tinyvlm import VLMConfig, train
from paperworks.shared.devices import autocast
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

OCTET, PNG = "application/octet-stream", "image/png"
HELD_OUT = 10**9  # seed offset of the generated held-out items a job evaluates on


def _store_model(ctx: JobContext, model, info: dict, message: str) -> None:
    ctx.announce_model(ctx.put_artifact(checkpoint.MODEL, checkpoint.to_bytes(model, info), OCTET), message)


def _modality_mix_scores(model, seed: int, device: str, n: int = 600) -> dict:
    rng = np.random.default_rng(seed)
    items = conflicts.sample(
        rng, rng.integers(0, conflicts.LEVELS, n), rng.integers(0, conflicts.LEVELS, n), conflict=False
    )
    both = items.tokens("both")
    return {
        "text_only_accuracy": train.accuracy(model, items.pixels("text"), both, items.text_answer, device),
        "image_only_accuracy": train.accuracy(
            model, items.images, items.tokens("image"), items.visual_answer, device
        ),
        "bimodal_accuracy": train.accuracy(model, items.images, both, items.visual_answer, device),
    }


def _vqa_scores(model, seed: int, n: int, device: str) -> dict:
    rng = np.random.default_rng(seed)
    ind = rl.evaluate(model, vqa.sample(rng, n, "in_distribution"), device)
    anti = rl.evaluate(model, vqa.sample(rng, n, "anti_prior"), device)
    return {
        "in_distribution_accuracy": ind["accuracy"],
        "anti_prior_accuracy": anti["accuracy"],
        "visual_dependency": ind["visual_dependency"],
        "blank_accuracy": ind["blank_accuracy"],
    }


def run_pretrain(params: PretrainParams, ctx: JobContext) -> dict:
    config = VLMConfig(
        d_model=params.d_model,
        heads=params.heads,
        vision_layers=params.vision_layers,
        lm_layers=params.lm_layers,
    )
    model = train.build(config, params.seed, ctx.device)
    rng = np.random.default_rng(params.seed)
    if params.task == "modality_mix":

        def batches(_step):
            return conflicts.training_batch(
                rng, params.batch_size, params.text_fraction, params.image_fraction
            )
    else:

        def batches(_step):
            b = vqa.sample(rng, params.batch_size, "train", params.prior_strength)
            return b.images, b.tokens, b.answers

    def on_step(step, loss):
        ctx.progress(step, params.steps + 1, stage="training", message=f"loss {loss:.4f}")

    with autocast(ctx.device):
        loss = train.fit(model, batches, params.steps, params.learning_rate, ctx.device, on_step)
    if params.task == "modality_mix":
        scores = _modality_mix_scores(model, params.seed + HELD_OUT, ctx.device)
    else:
        scores = _vqa_scores(model, params.seed + HELD_OUT, 500, ctx.device)
        scores.pop("blank_accuracy")
    info = {"task": params.task, "job_id": ctx.job_id}
    _store_model(ctx, model, info, f"TinyVLM ({params.task}, {checkpoint.parameters(model)} parameters)")
    ctx.progress(params.steps + 1, params.steps + 1, stage="done", message=f"loss {loss:.4f}")
    return {"task": params.task, "final_loss": loss, "parameters": checkpoint.parameters(model), **scores}


def run_build_conflict_set(params: BuildConflictSetParams, ctx: JobContext) -> dict:
    cs = conflicts.build_grid(params.seed, params.per_cell)
    ctx.put_artifact("conflict_set.npz", data.conflict_set_bytes(cs), OCTET)
    ctx.progress(1, 1, stage="done", message=f"{len(cs)} items")
    return {"items": len(cs), "cells": conflicts.LEVELS**2, "per_cell": params.per_cell}


def _records_bytes(cs: conflicts.ConflictSet, records: audit.Records, indices) -> bytes:
    arrays = cs.to_arrays() | {f"relative_{i}": records.relative(i) for i in indices}
    arrays |= {
        "follow": records.follow(),
        "oscillations": records.oscillations(),
        "margins": records.margins(),
    }
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def run_audit_modality_following(params: AuditParams, ctx: JobContext) -> dict:
    ctx.progress(0, 3, stage="loading", message="model and conflict items")
    model, _ = data.model_of(ctx, params.model_job_id)
    cs = data.conflict_items(params, ctx)
    ctx.progress(1, 3, stage="probing", message=f"{len(cs)} items: text only, image only, both, logit lens")
    records = audit.run_model(model, cs, ctx.device)
    if (records.follow() != audit.OTHER).sum() < 10:
        raise InvalidArgument("conflict_set", "fewer than 10 items followed either modality: nothing to fit")
    ctx.progress(2, 3, stage="fitting", message=f"logistic fit, {params.bootstrap} bootstrap resamples")
    out = audit.audit(
        records, tuple(params.indices), params.bins, params.bootstrap, params.epsilon, params.seed
    )
    first = out["laws"][params.indices[0]]
    x_star = first["balance_point"]
    d = np.abs(records.relative(params.indices[0]) - x_star)
    ctx.put_json(
        "audit.json",
        {
            "model_job_id": params.model_job_id,
            "indices": list(params.indices),
            "epsilon": params.epsilon,
            **out,
        },
    )
    ctx.put_artifact("records.npz", _records_bytes(cs, records, params.indices), OCTET)
    ctx.put_artifact("following_curve.png", figures.following_curve(out["laws"]), PNG)
    ctx.put_artifact(
        "layer_trajectories.png",
        figures.layer_trajectories(records.margins(), d < params.epsilon, d > 2 * params.epsilon),
        PNG,
    )
    ctx.progress(3, 3, stage="done", message=f"balance point {x_star:.3f}")
    return {
        "balance_point": x_star,
        "ci_low": first["ci"][0],
        "ci_high": first["ci"][1],
        "spearman": first["spearman_binned"],
        "spearman_p": first["spearman_items_p"],
        "balance_points": {i: law["balance_point"] for i, law in out["laws"].items()},
        "tfr": out["ratios"]["tfr"],
        "vfr": out["ratios"]["vfr"],
        "oscillations_ambiguous": out["oscillations"]["ambiguous"],
        "oscillations_clear": out["oscillations"]["clear"],
        "items": len(cs),
    }


def _held_out(model, cs, target: str, epsilon: float, device: str) -> dict:
    records = audit.run_model(model, cs, device)
    law = audit.following_law(records, "entropy", n_boot=10)
    return {
        "balance_point": law["balance_point"],
        "target_following": float(np.nanmean(audit.grid_following(records, target))),
        "oscillations": audit.oscillation_bands(records, law["balance_point"], epsilon)["ambiguous"],
    }


def run_steer_preference(params: SteerParams, ctx: JobContext) -> dict:
    field = "audit_job_id"
    raw, _ = ctx.job_artifact(
        "vlm", params.audit_job_id, "audit.json", field, kind="audit_modality_following"
    )
    report = json.loads(raw)
    model, info = data.model_of(ctx, report["model_job_id"], field)
    raw, _ = ctx.job_artifact(
        "vlm", params.audit_job_id, "records.npz", field, kind="audit_modality_following"
    )
    with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
        items = conflicts.ConflictSet.from_arrays({f: npz[f] for f in conflicts.FIELDS})
        index = report["indices"][0]
        relative = npz[f"relative_{index}"]
    x_star = report["laws"][index]["balance_point"]
    if not np.isfinite(x_star):
        raise InvalidArgument(field, "the audit found no balance point (the following curve does not fall)")
    chosen = steer.select_cases(relative, x_star, params.cases, params.selection, params.target_modality)
    held_out = conflicts.build_grid(params.seed + HELD_OUT, params.eval_per_cell)
    ctx.progress(0, params.steps + 2, stage="auditing", message="held-out grid before SFT")
    before = _held_out(model, held_out, params.target_modality, params.epsilon, ctx.device)

    def on_step(step, loss):
        ctx.progress(step, params.steps + 2, stage="sft", message=f"loss {loss:.4f}")

    with autocast(ctx.device):
        steer.steer(
            model,
            items.subset(chosen),
            params.target_modality,
            params.steps,
            params.batch_size,
            params.learning_rate,
            params.seed,
            ctx.device,
            on_step,
        )
    after = _held_out(model, held_out, params.target_modality, params.epsilon, ctx.device)
    sign = 1.0 if params.target_modality == "text" else -1.0
    result = {
        "cases": int(len(chosen)),
        "within_epsilon": int((np.abs(relative[chosen] - x_star) < params.epsilon).sum()),
        "balance_point_before": before["balance_point"],
        "balance_point_after": after["balance_point"],
        "shift_toward_target": sign * (after["balance_point"] - before["balance_point"]),
        "target_following_before": before["target_following"],
        "target_following_after": after["target_following"],
        "oscillations_before": before["oscillations"],
        "oscillations_after": after["oscillations"],
    }
    ctx.put_json(
        "steering.json",
        {
            "audit_job_id": params.audit_job_id,
            "index": index,
            "x_star": x_star,
            "selected": chosen.tolist(),
            **result,
        },
    )
    _store_model(
        ctx,
        model,
        info | {"job_id": ctx.job_id, "steered": params.target_modality},
        f"TinyVLM steered toward {params.target_modality} ({params.selection} cases)",
    )
    ctx.progress(
        params.steps + 2,
        params.steps + 2,
        stage="done",
        message=f"balance point {before['balance_point']:.3f} -> {after['balance_point']:.3f}",
    )
    return result


def run_train_rl(params: TrainRLParams, ctx: JobContext) -> dict:
    model, info = data.model_of(ctx, params.model_job_id)
    overrides = {
        k: v for k in ("kl_beta", "clip_high", "gamma", "entropy") if (v := getattr(params, k)) is not None
    }
    config = rl.RLConfig.preset(
        params.algorithm,
        params.base,
        steps=params.steps,
        prompts=params.prompts,
        group=params.group_size,
        learning_rate=params.learning_rate,
        updates=params.updates,
        prior_strength=params.prior_strength,
        seed=params.seed,
        **overrides,
    )
    watch = vqa.sample(
        np.random.default_rng(params.seed + HELD_OUT + 1), min(params.eval_items, 200), "in_distribution"
    )

    def on_step(step, record):
        vd = record.get("visual_dependency")
        ctx.progress(
            step,
            params.steps,
            stage=f"{params.algorithm} training",
            message=f"reward {record['reward']:.3f} kl {record['kl']:.4f} discrepancy "
            f"{record['discrepancy']:.4f}" + ("" if vd is None else f" visual dependency {vd:.3f}"),
        )

    history = rl.train(model, config, ctx.device, watch, max(1, params.steps // 10), on_step)
    scores = _vqa_scores(model, params.seed + HELD_OUT, params.eval_items, ctx.device)
    ctx.put_json("history.json", {"config": config.__dict__, "history": history})
    _store_model(
        ctx,
        model,
        info | {"job_id": ctx.job_id, "rl": params.algorithm},
        f"TinyVLM after {params.algorithm} ({params.steps} steps)",
    )
    name = params.algorithm if params.algorithm in ("grpo", "dapo") else f"{params.algorithm}-{params.base}"
    return {
        "algorithm": name,
        "final_reward": float(np.nanmean([h["reward"] for h in history[-10:]])),
        "kl": history[-1]["kl"],
        "discrepancy": history[-1]["discrepancy"],
        **scores,
    }
