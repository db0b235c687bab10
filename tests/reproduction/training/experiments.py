"""Experiment drivers for the Cornstarch claims (used by test_training_claims.py at CI size and by
tests/benchmarks/bench_training.py at full size).

(a) `cp_balance`: max/mean rank load of the uniform, zigzag and LPT splits on synthetic multimodal
    (and causal-only) sequences.
(b) `partition_study`: per freezing pattern, profile the model, partition it frozen-aware and with
    the frozen-unaware baselines, predict each plan's iteration time with the simulator, and (when
    `measure`) run every plan for real on `world` processes and measure its iteration time; the
    simulator is also replayed on the run's own per-stage op durations (schedule-model error alone,
    without the cost model's).
(c) `same_model`: train under several partitions on processes and single-process; compare the loss
    curves; run CP ring attention under every split mode and compare with unsplit attention.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch
from paperworks.services.training.cornstarch import context, costs, launch, partition, pipeline, schedule
from paperworks.services.training.cornstarch.model import (
    MLLM,
    EncoderConfig,
    Freeze,
    MLLMConfig,
    microbatches,
    synthetic_batch,
)

# the study's model: a heavier encoder (64 patch tokens) than text (32 tokens), as in real MLLMs
STUDY = MLLMConfig(
    encoders=(EncoderConfig(tokens=64, input_dim=48, d_model=64, layers=6),),
    d_model=64,
    llm_layers=6,
    text_tokens=32,
)
FROZEN_PATTERNS = ("frozen_encoder", "projector_only", "frozen_llm_lora")


def cp_balance(seeds, cps=(2, 4, 8), seq_len: int = 8192) -> dict:
    out = {}
    for kind in ("multimodal", "causal"):
        for cp in cps:
            per_mode = {m: [] for m in context.MODES}
            for seed in seeds:
                seq = context.synthetic_sequence(
                    np.random.default_rng(seed), seq_len, causal_only=kind == "causal"
                )
                work = context.tile_workload(seq)
                for mode in context.MODES:
                    per_mode[mode].append(context.imbalance(work, context.split_blocks(work, cp, mode)))
            out[f"{kind}/cp{cp}"] = {m: float(np.mean(v)) for m, v in per_mode.items()}
            out[f"{kind}/cp{cp}/lpt_wins"] = float(
                np.mean(
                    [
                        lpt <= min(z, u) + 1e-12
                        for lpt, z, u in zip(
                            per_mode["lpt"], per_mode["zigzag"], per_mode["uniform"], strict=True
                        )
                    ]
                )
            )
    return out


def _modules(model: MLLM) -> dict:
    return {**{n: len(layers) for n, layers in model.branches.items()}, "llm": len(model.llm)}


def partition_study(
    cfg: MLLMConfig = STUDY,
    patterns=FROZEN_PATTERNS,
    world: int = 2,
    m: int = 4,
    batch_size: int = 16,
    repeats: int = 7,
    measure: bool = False,
    steps: int = 8,
    analytic: bool = False,
) -> dict:
    """Per frozen pattern, the four partitions' predicted (and with `measure`, measured) 1F1B
    iteration times; `analytic` plans from FLOP counts (`costs.analytic`) instead of profiled
    timings, so the prediction does not depend on the machine's load."""
    torch.set_num_threads(1)
    out = {}
    for pattern in patterns:
        model = MLLM(cfg).apply_freeze(Freeze.pattern(pattern, cfg.encoders))
        mb = microbatches(synthetic_batch(cfg, batch_size, 0), m)[0]
        prof = costs.analytic(model, batch_size // m) if analytic else costs.profile(model, mb, repeats)
        plans = {
            meth: partition.partition(prof, _modules(model), world, m, meth) for meth in partition.METHODS
        }
        row = {
            meth: {
                "stages": [len(p["layers"]) for p in plan["stages"]],
                "predicted": plan["predicted_iteration_time"],
            }
            for meth, plan in plans.items()
        }
        if measure:
            tasks = [
                {
                    "kind": "pipeline",
                    "model": cfg.to_dict(),
                    "pattern": pattern,
                    "plan": plan["stages"],
                    "microbatches": m,
                    "batch_size": batch_size,
                    "steps": steps,
                }
                for plan in plans.values()
            ]
            ranks = launch.launch({"kind": "interleave", "tasks": tasks}, world, timeout=900)
            for i, meth in enumerate(plans):
                # replay: the simulator fed with the run's own per-stage op durations (last step)
                fwd, bwd = [], []
                for r in ranks:
                    ops = r[i]["timeline"]
                    f = [e - b for op, _, b, e in ops if op == "F"]
                    bk = [e - b for op, _, b, e in ops if op == "B"]
                    fwd.append(statistics.median(f))
                    bwd.append(statistics.median(bk) if bk else 0.0)
                has_b = partition.stage_costs(plans[meth]["stages"], prof)[2]
                replay = schedule.simulate(plans[meth]["stages"], fwd, bwd, m, 0.0, has_b)["iteration_time"]
                row[meth]["replayed"] = replay
                row[meth]["measured_last"] = ranks[-1][i]["iteration_times"][-1]
                row[meth]["replay_error"] = replay / row[meth]["measured_last"] - 1
                times = ranks[-1][i]["iteration_times"][2:]  # the first steps warm up
                row[meth]["measured"] = statistics.median(times)
                row[meth]["measured_min"] = min(times)
                row[meth]["measured_spread"] = [min(times), max(times)]
        aware = row["frozen_aware"]
        for meth in partition.METHODS:
            row[meth]["predicted_ratio"] = row[meth]["predicted"] / aware["predicted"]
            if measure:
                row[meth]["measured_ratio"] = row[meth]["measured"] / aware["measured"]
                row[meth]["measured_min_ratio"] = row[meth]["measured_min"] / aware["measured_min"]
                row[meth]["sim_error"] = row[meth]["predicted"] / row[meth]["measured"] - 1
        out[pattern] = row
    return out


def same_model(
    cfg: MLLMConfig, pattern: str, cuts, steps: int = 5, m: int = 4, batch_size: int = 8, seed: int = 0
):
    """Loss curves: single process vs a 2-stage pipeline cut after each of `cuts` layers; and CP ring
    attention (2 ranks) under every split mode vs unsplit attention (max abs difference)."""
    ids = [list(x) for x in MLLM(cfg).layer_ids()]
    plans = [[{"layers": ids[:c], "next": 1}, {"layers": ids[c:], "next": None}] for c in cuts]
    modality = np.array([0] * 150 + [1] * 300 + [0] * 100 + [2] * 120 + [0] * 98)  # 768 tokens, 6 blocks
    tasks = [
        {
            "kind": "pipeline",
            "model": cfg.to_dict(),
            "pattern": pattern,
            "plan": p,
            "microbatches": m,
            "batch_size": batch_size,
            "steps": steps,
            "seed": seed,
            "lr": 3e-3,
        }
        for p in plans
    ]
    tasks += [
        {"kind": "cp_attention", "modality": modality.tolist(), "mode": mode, "seed": 7}
        for mode in context.MODES
    ]
    ranks = launch.launch({"kind": "sequence", "tasks": tasks}, 2, timeout=600)
    ref = MLLM(cfg).apply_freeze(Freeze.pattern(pattern, cfg.encoders))
    opt = torch.optim.AdamW([p for p in ref.parameters() if p.requires_grad], lr=3e-3)
    reference = []
    for step in range(steps):
        reference.append(
            pipeline.reference_step(ref, synthetic_batch(cfg, batch_size, seed * 100_003 + step), m)
        )
        opt.step()
        opt.zero_grad(set_to_none=True)
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(len(modality), 16, generator=g, dtype=torch.float64) for _ in range(3))
    full = context.masked_attention(q, k, v, context.attention_mask(modality))
    cp_err, imb = {}, {}
    for j, mode in enumerate(context.MODES):
        res = [r[len(plans) + j] for r in ranks]
        pos = torch.cat([r["offsets"] for r in res])
        assert torch.equal(pos.sort().values, torch.arange(len(modality)))
        cp_err[mode] = float((torch.cat([r["out"] for r in res]) - full[pos]).abs().max())
        imb[mode] = res[0]["imbalance"]
    return {
        "reference": reference,
        "pipelines": {str(c): ranks[-1][i]["losses"] for i, c in enumerate(cuts)},
        "cp_max_abs_error": cp_err,
        "cp_imbalance": imb,
    }
