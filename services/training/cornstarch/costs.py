"""The per-layer cost model, measured by profiling (Cornstarch's frozen-status-aware costs; the cost
rule is our reconstruction, validated against measured runs).

Per layer `l`, on one microbatch, medians of `repeats` timings:
  f_l   forward (with autograd recording when a gradient will flow through it, else under no_grad);
  bw_l  backward with weight gradients (the layer's trainable parameters, plus its input gradient
        when something upstream trains);
  bi_l  input-gradient-only backward (all the layer's parameters frozen).
Its backward cost under a freezing pattern: 0 when no gradient flows through it (it and everything
upstream frozen: no backward reaches it and nothing is saved), `bi_l` when it is frozen but something
upstream trains, `bw_l` when it has trainable parameters. Memory: parameter bytes (+ gradient and two
Adam moments for trainable ones) and the bytes autograd saves for backward (saved-tensor hooks).

Devices: `profile` measures where the ranks will run (`device`: the model and the microbatch move
there; on CUDA every timing synchronizes the device before reading the clock).
"""

from __future__ import annotations

import statistics
import time

import torch

from .model import MLLM
from .placement import synchronize


def _saved_bytes(fn) -> tuple[object, int]:
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, total


def _inputs(model: MLLM, batch: dict) -> dict:
    """The activation dict entering every layer (detached), from one no-grad forward."""
    acts, out = {}, {}
    with torch.no_grad():
        for lid in model.layer_ids():
            out[lid] = {k: v.detach().clone() for k, v in acts.items()}
            acts = model.layer(lid)(acts, batch)
    return out


def _outputs_with_grad(acts: dict) -> list[torch.Tensor]:
    return [v for v in acts.values() if torch.is_tensor(v) and v.requires_grad]


def profile(model: MLLM, batch: dict, repeats: int = 7, device="cpu") -> dict:
    """Per layer (keyed 'module:index'): f, bw, bi (seconds), params, trainable, saved (bytes).
    Timed on one intra-op thread, as every pipeline worker runs, on `device`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model.to(device)
    batch = {k: v.to(device) for k, v in batch.items()}
    try:
        return _profile(model, batch, repeats, device)
    finally:
        torch.set_num_threads(threads)


def _clock(fn, device="cpu") -> float:
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def _profile(model: MLLM, batch: dict, repeats: int, device="cpu") -> dict:
    """Repeats run round-robin over the layers (repeat r of every layer before r + 1), so load drift
    on a shared machine hits all layers alike; bw and bi are medians of per-repeat differences."""
    needs = model.needs_grad()
    ids = model.layer_ids()
    enc_out = any(needs[(name, len(layers) - 1)] for name, layers in model.branches.items())
    upstream = {lid: (needs[(lid[0], lid[1] - 1)] if lid[1] else lid[0] == "llm" and enc_out) for lid in ids}
    batch = model.stage_batch(ids, batch)  # shared per-stage inputs (rotary embeddings) once
    inputs = _inputs(model, batch)

    def make(lid, in_grad: bool, on: bool):
        acts = {
            k: v.detach().requires_grad_(in_grad and v.is_floating_point()) for k, v in inputs[lid].items()
        }
        with torch.set_grad_enabled(on):
            return acts, model.layer(lid)(acts, batch)

    def backward(lid, in_grad: bool):
        _, res = make(lid, in_grad, True)
        outs = _outputs_with_grad(res)
        if outs:
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])

    def frozen_backward(lid):
        layer = model.layer(lid)
        flags = [p.requires_grad for p in layer.parameters()]
        layer.requires_grad_(False)
        try:
            return _clock(lambda: backward(lid, True), device)
        finally:
            for p, flag in zip(layer.parameters(), flags, strict=True):
                p.requires_grad_(flag)

    trainable = {lid: [p for p in model.layer(lid).parameters() if p.requires_grad] for lid in ids}
    samples = {lid: {"f": [], "bw": [], "bi": []} for lid in ids}
    for lid in ids:  # warm-up
        make(lid, upstream[lid], needs[lid])
    for _ in range(repeats):
        for lid in ids:
            f = _clock(lambda lid=lid: make(lid, upstream[lid], needs[lid]), device)
            samples[lid]["f"].append(f)
            if trainable[lid]:
                samples[lid]["bw"].append(_clock(lambda lid=lid: backward(lid, upstream[lid]), device) - f)
            samples[lid]["bi"].append(frozen_backward(lid) - f)
    model.zero_grad(set_to_none=True)
    out = {}
    for lid in ids:
        _, saved = _saved_bytes(lambda lid=lid: make(lid, upstream[lid], needs[lid]))
        s = samples[lid]
        out[f"{lid[0]}:{lid[1]}"] = {
            "f": statistics.median(s["f"]),
            "bw": max(statistics.median(s["bw"]), 0.0) if s["bw"] else 0.0,
            "bi": max(statistics.median(s["bi"]), 0.0),
            "params": sum(p.numel() for p in model.layer(lid).parameters()),
            "trainable": sum(p.numel() for p in trainable[lid]),
            "saved": saved if needs[lid] else 0,
            "needs_grad": needs[lid],
        }
    return out


def backward_cost(entry: dict) -> float:
    """b_l under the layer's freezing pattern (see the module docstring)."""
    if not entry["needs_grad"]:
        return 0.0
    return entry["bw"] if entry["trainable"] else entry["bi"]


def memory_bytes(entries: list[dict], in_flight: int) -> float:
    """Stage memory: fp32 parameters, gradient + Adam moments of trainable ones, saved activations
    of `in_flight` microbatches."""
    params = sum(e["params"] * 4 + e["trainable"] * 12 for e in entries)
    return params + in_flight * sum(e["saved"] for e in entries)


def analytic(model: MLLM, microbatch_size: int) -> dict:
    """A profile-shaped cost table from FLOP counts instead of timings (for inline planning):
    f = 2 x (multiply-adds of the layer's linear maps + attention's 2 T^2 d) in GFLOP, bw = 2f, bi = f;
    saved = the layer's output activations (bytes)."""
    needs = model.needs_grad()
    out = {}
    for lid in model.layer_ids():
        layer = model.layer(lid)
        tokens = (
            model.cfg.seq_len
            if lid[0] == "llm"
            else next(e.tokens for e in model.cfg.encoders if e.name == lid[0])
        )
        width = (
            model.cfg.d_model
            if lid[0] == "llm"
            else next(e.d_model for e in model.cfg.encoders if e.name == lid[0])
        )
        matmul = sum(
            p.numel()
            for n, p in layer.named_parameters()
            if p.dim() == 2 and "tok" not in n and "embedding" not in n  # lookups, not matmuls
        )
        attn = 2 * tokens * tokens * width if layer.kind == "block" else 0
        f = 2 * microbatch_size * (tokens * matmul + attn) / 1e9
        trainable = sum(p.numel() for p in layer.parameters() if p.requires_grad)
        out[f"{lid[0]}:{lid[1]}"] = {
            "f": f,
            "bw": 2 * f,
            "bi": f,
            "params": sum(p.numel() for p in layer.parameters()),
            "trainable": trainable,
            "needs_grad": needs[lid],
            "saved": 4 * microbatch_size * tokens * width * (6 if layer.kind == "block" else 1)
            if needs[lid]
            else 0,
        }
    return out
