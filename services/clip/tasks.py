"""The clip jobs: thin handlers that build or load the CLIP (`data`, `tinyclip`), call the methods
(`rita`, `vacsr`) on the job's device (`ctx.device`, float32: entropies, Sinkhorn and PGD are the
measurement), and store results and models."""

from __future__ import annotations

import torch
from paperworks.services.clip import data, tinyclip, vacsr, world
from paperworks.services.clip.rita import TTAConfig, evaluate_robustness, table
from paperworks.services.clip.spec import (
    EvaluateRetrievalParams,
    EvaluateRobustnessParams,
    TrainAdapterParams,
    TrainCLIPParams,
)
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

OCTET = "application/octet-stream"
HELD_OUT = 10**9  # seed offset of the held-out world items a job evaluates on


@torch.no_grad()
def features(encoder, images: torch.Tensor, texts: list[str], batch: int = 256):
    """(image features, text features), L2-normalised, on the CPU."""
    img = torch.cat([encoder.encode_image(images[i : i + batch]).cpu() for i in range(0, len(images), batch)])
    txt = torch.cat([encoder.encode_text(texts[i : i + batch]).cpu() for i in range(0, len(texts), batch)])
    return img, txt


def run_train_clip(params: TrainCLIPParams, ctx: JobContext) -> dict:
    w = params.width
    config = {
        "vision": {
            "patch_size": params.patch_size,
            "num_hidden_layers": params.vision_layers,
            "hidden_size": w,
            "intermediate_size": 2 * w,
        },
        "text": {"hidden_size": w, "intermediate_size": 2 * w, "num_hidden_layers": params.text_layers},
        "projection_dim": w,
    }
    encoder = tinyclip.build_tiny(params.seed, ctx.device, **config)
    loss = tinyclip.train_clip(
        encoder,
        params.steps,
        params.seed,
        batch=params.batch_size,
        lr=params.learning_rate,
        on_step=lambda s, v: ctx.progress(s, params.steps, "train", f"contrastive loss {v:.3f}"),
    )
    held = world.make_world(1000, params.seed + HELD_OUT)
    acc = tinyclip.zero_shot_accuracy(encoder, held.images, held.labels, world.class_prompts())
    img, txt = features(encoder, held.images[:500], held.captions[:500])
    r1 = float(((img @ txt.T).argmax(1) == torch.arange(500)).float().mean())
    info = {"steps": params.steps, "seed": params.seed, "zero_shot_accuracy": acc}
    ref = ctx.put_artifact(data.MODEL, tinyclip.to_bytes(encoder, info), OCTET)
    ctx.announce_model(ref, f"tiny CLIP on the shapes world, zero-shot accuracy {acc:.3f}")
    return {
        "final_loss": loss,
        "zero_shot_accuracy": acc,
        "retrieval_r1": r1,
        "parameters": sum(p.numel() for p in encoder.model.parameters()),
    }


def run_evaluate_robustness(params: EvaluateRobustnessParams, ctx: JobContext) -> dict:
    encoder, _ = data.load_model(params.model, ctx)
    images, labels, classes, descriptors = data.test_images(params.test, ctx)
    cfg = TTAConfig(
        views=params.views,
        alpha=params.alpha,
        epsilon=params.sinkhorn_epsilon,
        gamma=params.gamma,
        capacity=params.capacity,
        loss=params.tta_loss,
    )
    try:
        res = evaluate_robustness(
            encoder,
            images,
            labels,
            classes,
            descriptors,
            [e / 255 for e in params.eps_255],
            list(params.methods),
            cfg,
            params.seed,
            progress=lambda d, t, m: ctx.progress(d, t, "evaluate", m),
        )
    except ValueError as exc:  # a user's class names or descriptors the tokenizer refuses
        raise InvalidArgument("test", str(exc)) from None
    rows = res["rows"]
    ctx.put_json(
        "robustness.json",
        {
            "rows": rows,
            "classes": classes,
            "descriptors": descriptors,
            "config": cfg.__dict__,
            "predictions": res["predictions"],
        },
    )
    md = table(rows)
    ctx.put_artifact("robustness.md", md.encode(), "text/markdown")
    top = max(r["eps_255"] for r in rows)
    best = max((r for r in rows if r["eps_255"] == top), key=lambda r: r["accuracy"])
    return {"rows": rows, "n": len(labels), "best_robust_method": best["method"]}


def _world_split(encoder, n: int, seed: int):
    w = world.make_world(n, seed)
    img, txt = features(encoder, w.images, w.captions)
    return img, txt, torch.arange(n), w.attrs


def run_train_adapter(params: TrainAdapterParams, ctx: JobContext) -> dict:
    encoder, _ = data.load_model(params.model, ctx)
    img, txt, labels, _ = _world_split(encoder, params.train_items, params.seed)
    labels = vacsr.swap_captions(labels, params.noise, params.seed) if params.noise > 0 else labels
    vimg, vtxt, vlab, _ = _world_split(encoder, params.val_items, params.seed + HELD_OUT // 2)
    config = vacsr.TrainConfig(
        epochs=params.epochs,
        batch_size=params.batch_size,
        learning_rate=params.learning_rate,
        seed=params.seed,
    )
    adapter, history = vacsr.train_adapter(
        params.adapter,
        img,
        txt,
        labels,
        val=(vimg, vtxt, vlab),
        config=config,
        device=ctx.device,
        progress=lambda e, r: ctx.progress(e, params.epochs, "train", f"val RSUM {r.get('val_rsum', 0):.1f}"),
    )
    meta, state = vacsr.adapter_payload(adapter)
    info = {"model": params.model.model_dump(mode="json"), "adapter": params.adapter, "history": history}
    ctx.put_artifact(data.ADAPTER, data.adapter_to_bytes(meta, state, info), OCTET)
    best = max((r.get("val_rsum", float("nan")) for r in history), default=float("nan"))
    return {"adapter": params.adapter, "epochs": len(history), "val_rsum": best}


def run_evaluate_retrieval(params: EvaluateRetrievalParams, ctx: JobContext) -> dict:
    raw, _ = ctx.job_artifact(
        "clip", params.adapter_job_id, data.ADAPTER, "adapter_job_id", kind="train_adapter"
    )
    meta, state, info = data.adapter_from_bytes(raw, "adapter_job_id")
    from paperworks.services.clip.spec import ModelSourceParams

    encoder, _ = data.load_model(ModelSourceParams.model_validate(info["model"]), ctx, "adapter_job_id")
    adapter = vacsr.load_adapter(meta, state, ctx.device)
    img, txt, labels, attrs = _world_split(encoder, params.items, params.seed + HELD_OUT)
    ctx.progress(1, 2, "evaluate", "features")
    metrics = vacsr.evaluate(
        adapter, img, txt, labels, world.similarity(attrs, attrs), params.relevance_threshold, ctx.device
    )
    metrics = {k: float(v) for k, v in metrics.items()}
    ctx.put_json("retrieval.json", metrics)
    ctx.progress(2, 2, "evaluate", "done")
    return {"metrics": metrics, "items": params.items, "adapter": meta["kind"]}
