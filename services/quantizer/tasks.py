"""The quantizer jobs: thin handlers that open the model and text (uploads, artifacts, s3://
objects or server paths, read as the job's tenant), run the method's pipeline on the job's device
(`ctx.device`; QAT's forward passes in bf16 autocast on CUDA, calibration and evaluation in
float32), store the checkpoint, and announce it."""

from __future__ import annotations

import copy
import functools
import math

from paperworks.shared.devices import autocast
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.tasks.context import JobContext

from . import checkpoint, coverage, data, diagnostics, methods, quantize
from .distill import evaluate_lm
from .spec import EvaluateParams, QuantizeParams

OCTET = "application/octet-stream"


def _reporter(ctx: JobContext):
    return lambda step, total, stage, message: ctx.progress(step, total, stage=stage, message=message)


def _lm_metrics(module, windows, decode) -> dict:
    """Loss, perplexity, bits per token and bits per byte of the windows' UTF-8 text."""
    out = evaluate_lm(module, windows)
    n_bytes = sum(len(decode(w[1:].tolist()).encode("utf-8")) for w in windows)
    out["bits_per_byte"] = out["loss"] * out["tokens"] / math.log(2) / max(n_bytes, 1)
    return out


def quant_config(params: QuantizeParams, seq_len: int) -> quantize.QuantConfig:
    """The method's settings from a job's parameters (the token budget becomes whole QAT steps)."""
    return quantize.QuantConfig(
        method=params.method, steps=params.token_budget // (params.batch_size * seq_len),
        batch=params.batch_size, seq_len=seq_len, lr=params.learning_rate,
        hidden_weight=params.hidden_weight, calib_windows=params.calibration_windows,
        init="greedy" if params.greedy_init else "svid", init_sweeps=params.init_sweeps,
        block_steps=params.block_steps, block_latent_lr=params.block_latent_lr,
        e2e_steps=params.e2e_steps, e2e_latent_lr=params.e2e_latent_lr,
        group_size=params.group_size, seed=params.seed)


def run_quantize(params: QuantizeParams, ctx: JobContext) -> dict:
    ctx.progress(0, 1, stage="loading", message=f"model {params.model.label}")
    backend = data.open_model(params.model, ctx, device=ctx.device)
    try:
        methods.get(params.method).check(backend.module)
    except ValueError as exc:
        raise InvalidArgument("method", str(exc)) from None
    seq_len = min(params.seq_len, backend.max_length)
    tokens = data.token_data(backend, data.load_texts(params.data, ctx), seq_len)
    cfg = quant_config(params, seq_len)
    teacher = backend.module.float()
    student, info = quantize.quantize(teacher, tokens, cfg, _reporter(ctx), device=ctx.device,
                                      amp=functools.partial(autocast, ctx.device))
    packed = quantize.pack(student)
    val = tokens.valid_windows(seq_len, 32)
    validation = {"base": _lm_metrics(teacher, val, backend.decode),
                  "quantized": _lm_metrics(packed, val, backend.decode)}
    base = {"kind": params.model.kind, "source": params.model.source.model_dump(exclude_defaults=True)}
    blob, manifest = checkpoint.save(packed, params.method, base)
    model_ref = ctx.put_artifact(data.CHECKPOINT, blob, OCTET)
    manifest_ref = ctx.put_json(data.MANIFEST, manifest)
    cov = manifest["coverage"]
    ctx.progress(1, 1, stage="coverage", message=coverage.describe(cov))
    ctx.announce_model(model_ref, f"{params.method} {manifest['bits_per_weight']:g}-bit checkpoint of "
                       f"model {params.model.label} ({coverage.describe(cov)}; "
                       f"manifest {manifest_ref['sha256']})")
    losses = info["losses"]
    return {"method": params.method, "bits_per_weight": manifest["bits_per_weight"],
            "bits_per_weight_with_scales": manifest["bits_per_weight_with_scales"],
            "bits_per_weight_parts": checkpoint.bits_per_weight(packed)["parts"],
            "bits_per_block_weight": cov["bits_per_block_weight"],
            "quantized_fraction": cov["quantized_fraction"], "float_weights": cov["float_weights"],
            "unfused_experts": len(manifest["unfused_experts"]),
            **({"warning": manifest["warning"]} if "warning" in manifest else {}),
            "layers": len(manifest["layers"]), "steps": len(losses), "tokens": cfg.tokens,
            "final_loss": losses[-1] if losses else None, "validation": validation,
            "checkpoint_sha256": model_ref["sha256"], "manifest_sha256": manifest_ref["sha256"],
            **({"block_reconstruction_error": info["block_reconstruction_error"]}
               if "block_reconstruction_error" in info else {})}


def run_evaluate(params: EvaluateParams, ctx: JobContext) -> dict:
    job_params, *shas = data.quantize_job(ctx.store, ctx.tenant, params.quantize_job_id, "quantize_job_id")
    blob, manifest = data.read_checkpoint(ctx.artifacts, *shas)
    ctx.progress(0, 1, stage="loading", message=f"base model {job_params.model.label}")
    backend = data.open_model(job_params.model, ctx, "quantize_job_id.model", ctx.device)
    base = backend.module.float()
    packed = checkpoint.load(blob, manifest, copy.deepcopy(base))
    seq_len = min(params.seq_len, backend.max_length)
    tokens = data.token_data(backend, data.load_texts(params.data, ctx), seq_len).to(ctx.device)
    windows = tokens.windows(seq_len, params.windows)
    metrics = {}
    for i, (name, model) in enumerate((("base", base), ("quantized", packed))):
        metrics[name] = _lm_metrics(model, windows, backend.decode)
        ctx.progress(i + 1, 2, stage="perplexity", message=f"{name}: {metrics[name]['perplexity']:.3f}")
    layers = diagnostics.layer_report(packed, base, tokens.calib(seq_len, 8, 0),
                                      on_layer=lambda i, n, name: ctx.progress(i, n, "diagnostics", name))
    report = {"quantize_job_id": params.quantize_job_id, "method": manifest["method"],
              "bits_per_weight": manifest["bits_per_weight"],
              "bits_per_weight_with_scales": manifest["bits_per_weight_with_scales"],
              **{k: manifest[k] for k in ("bits_per_block_weight", "quantized_fraction", "warning")
                 if k in manifest},
              **metrics,
              "perplexity_ratio": metrics["quantized"]["perplexity"] / metrics["base"]["perplexity"],
              "layers": layers, "layer_mean": diagnostics.summary(layers)}
    ctx.put_json("evaluation.json", report)
    return {k: v for k, v in report.items() if k != "layers"}
