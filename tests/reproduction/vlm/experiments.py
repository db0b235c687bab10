"""Experiment drivers of the vlm reproductions (used by test_vlm_claims.py and bench_vlm.py).

Modality following (arXiv 2511.02243): two TinyVLMs trained on the same generated data with opposite
modality skews (80 % text-only vs 80 % image-only items), audited on one conflict grid; boundary-case
vs easy-case SFT toward vision from the text-skewed model, same item count, steps and learning
rate, re-audited on a held-out grid.

CFPO (arXiv 2606.23206): one SFT-warmed shortcut-VQA model, then GRPO, DAPO, CFPO-G, CFPO-D, PAPO-G
and PAPO-D from the same weights with the same prompts budget, learning rate and seed, scored on
held-out in-distribution and anti-prior questions.

Settings (steps, learning rates, skews, N, epsilon) were chosen on validation seeds (0 for
modality following, 11 for CFPO); CI asserts seed 1; the benchmark runs seeds 1, 2, 3.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from paperworks.services.vlm.cfpo import rl
from paperworks.services.vlm.cfpo import task as vqa
from paperworks.services.vlm.following import audit, conflicts, steer
from paperworks.services.vlm.tinyvlm import VLMConfig, train

CONFIG = VLMConfig(d_model=32, heads=4, vision_layers=1, lm_layers=4)
DEVICE = "cpu"


def pretrain_mix(seed: int, text_fraction: float, image_fraction: float, steps: int = 300):
    model = train.build(CONFIG, seed, DEVICE)
    rng = np.random.default_rng(seed)
    train.fit(model, lambda _s: conflicts.training_batch(rng, 64, text_fraction, image_fraction), steps, 3e-3,
              DEVICE)
    return model


def held_out_audit(model, grid, epsilon: float = 0.1, n_boot: int = 200, seed: int = 0) -> dict:
    records = audit.run_model(model, grid, DEVICE)
    out = audit.audit(records, ("entropy", "one_minus_max"), n_boot=n_boot, epsilon=epsilon, seed=seed)
    out["vision_following"] = float(np.nanmean(audit.grid_following(records, "vision")))
    return out | {"records": records}


def modality_following(seed: int, per_cell: int = 40, cases: int = 200, sft_steps: int = 60,
                       sft_lr: float = 1e-3, epsilon: float = 0.1) -> dict:
    torch.set_num_threads(1)
    grid = conflicts.build_grid(seed + 100, per_cell)
    held = conflicts.build_grid(seed + 200, per_cell)
    text_model = pretrain_mix(seed, 0.8, 0.1)
    vision_model = pretrain_mix(seed, 0.1, 0.8)
    text_audit = held_out_audit(text_model, grid, epsilon, seed=seed)
    vision_audit = held_out_audit(vision_model, grid, epsilon, seed=seed)
    out = {"seed": seed, "text_skew": _summary(text_audit), "vision_skew": _summary(vision_audit)}
    x_star = text_audit["laws"]["entropy"]["balance_point"]
    relative = text_audit["records"].relative("entropy")
    before = held_out_audit(text_model, held, epsilon, n_boot=20)
    out["steering"] = {"before": _steer_summary(before)}
    for selection in ("boundary", "easy"):
        model = copy.deepcopy(text_model)
        chosen = steer.select_cases(relative, x_star, cases, selection, "vision")
        steer.steer(model, grid.subset(chosen), "vision", sft_steps, 32, sft_lr, seed, DEVICE)
        after = held_out_audit(model, held, epsilon, n_boot=20)
        out["steering"][selection] = _steer_summary(after) | {
            "within_epsilon": int((np.abs(relative[chosen] - x_star) < epsilon).sum())}
    return out


def _summary(a: dict) -> dict:
    keys = ("balance_point", "ci", "balance_quantile", "spearman_binned", "spearman_items",
            "spearman_items_p", "b")
    laws = {i: {k: law[k] for k in keys} for i, law in a["laws"].items()}
    return {"laws": laws, "ratios": a["ratios"], "oscillations": a["oscillations"],
            "curve": a["laws"]["entropy"]["curve"]}


def _steer_summary(a: dict) -> dict:
    return {"balance_point": a["laws"]["entropy"]["balance_point"],
            "vision_following": a["vision_following"],
            "oscillations_ambiguous": a["oscillations"]["ambiguous"], "tfr": a["ratios"]["tfr"]}


RL_RUNS = (("grpo", "grpo"), ("dapo", "dapo"), ("cfpo", "grpo"), ("cfpo", "dapo"), ("papo", "grpo"),
           ("papo", "dapo"))


def cfpo(seed: int, warm_steps: int = 150, rl_steps: int = 100, lr: float = 3e-4,
         eval_items: int = 600) -> dict:
    """Every RL run from the same warmed weights, same rollout budget per step, same seed."""
    torch.set_num_threads(1)
    base = train.build(CONFIG, seed, DEVICE)
    rng = np.random.default_rng(seed)

    def batches(_step):
        b = vqa.sample(rng, 64, "train")
        return b.images, b.tokens, b.answers

    train.fit(base, batches, warm_steps, 3e-3, DEVICE)
    erng = np.random.default_rng(seed + 10_000)
    ind, anti = vqa.sample(erng, eval_items, "in_distribution"), vqa.sample(erng, eval_items, "anti_prior")
    out = {"seed": seed, "warm": {"in_distribution": rl.evaluate(base, ind, DEVICE),
                                  "anti_prior": rl.evaluate(base, anti, DEVICE)}}
    for algorithm, objective in RL_RUNS:
        model = copy.deepcopy(base)
        config = rl.RLConfig.preset(algorithm, objective, steps=rl_steps, learning_rate=lr, seed=seed)
        history = rl.train(model, config, DEVICE)
        name = algorithm if algorithm in ("grpo", "dapo") else f"{algorithm}-{objective}"
        out[name] = {"in_distribution": rl.evaluate(model, ind, DEVICE),
                     "anti_prior": rl.evaluate(model, anti, DEVICE),
                     "final_reward": float(np.mean([h["reward"] for h in history[-10:]])),
                     "prompts_drawn": int(sum(h["prompts_drawn"] for h in history))}
    return out
