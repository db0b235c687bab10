"""Experiment drivers of the SkillNet reproductions (used by test_skillnet_claims.py and, with larger
settings, by tests/benchmarks/bench_moe.py).

One run (seed s): expert demonstrations of the 31 training compositions (base verbs only), then every
arm (skillnet, dense, token_moe[, random_verb_moe]) trained from the same data with the same steps,
batch, learning rate and seed; each is scored on
  - zero-shot: the 8 held-out compositions (sim.ZERO_SHOT_HELD_OUT), `episodes` seeded rollouts each;
  - few-shot: fine-tuned on 5 demonstrations of each of 4 tasks with the new verb `slide` (which shares
    push's motion cluster), half of every batch replaying the base data, then rolled out on those tasks
    from unseen initial states;
  - routing: mean expert distribution per skill on the base demonstrations; Spearman correlation
    between routing similarity (1 - JS) and hierarchy similarity over pairs of skills with different verbs.
Settings (steps, demos, fine-tuning steps, head) were fixed on validation seed 0; CI asserts seed 1.
"""
from __future__ import annotations

import copy
import time

import torch
from paperworks.services.moe import skillnet
from paperworks.services.moe.skillnet import sim

CI = {"demos_per_task": 8, "steps": 400, "batch": 128, "lr": 3e-3, "few_demos": 5, "ft_steps": 150,
      "episodes": 25, "head": "mse"}


def run(seed: int, arms=("skillnet", "dense", "token_moe"), settings: dict | None = None) -> dict:
    cfg = CI | (settings or {})
    torch.set_num_threads(1)
    train_tasks, held = sim.zero_shot_split()
    demos = sim.make_demonstrations(train_tasks, cfg["demos_per_task"], seed)
    few = sim.make_demonstrations(sim.few_shot_tasks(), cfg["few_demos"], seed + 500)
    out = {"seed": seed, "settings": cfg, "samples": len(demos), "expert_success": demos.success}
    for arm in arms:
        t0 = time.time()
        policy = skillnet.train_policy(skillnet.PolicyConfig(arm=arm, head=cfg["head"]), demos, cfg["steps"],
                                       "cpu", seed=seed, batch=cfg["batch"], lr=cfg["lr"])
        zs = skillnet.evaluate(policy, held, cfg["episodes"], seed + 1000)
        routing = skillnet.routing_by_skill(policy, demos, seed=seed)
        corr = skillnet.routing_hierarchy_correlation(routing) if routing else {}
        tuned = skillnet.train_policy(arm, few, cfg["ft_steps"], seed=seed, batch=cfg["batch"],
                                      lr=cfg["lr"] / 3, policy=copy.deepcopy(policy), replay=demos)
        fs = skillnet.evaluate(tuned, sim.few_shot_tasks(), cfg["episodes"], seed + 2000)
        out[arm] = {"zero_shot": zs["success"], "zero_shot_first": zs["first_subtask"],
                    "zero_shot_per_task": zs["per_task"], "few_shot": fs["success"],
                    "few_shot_first": fs["first_subtask"], "routing_spearman": corr.get("spearman"),
                    "routing_pearson": corr.get("pearson"), "seconds": round(time.time() - t0, 1)}
    return out


if __name__ == "__main__":
    import json
    import sys
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    arms = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else skillnet.ARMS
    extra = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    res = run(seed, arms, extra)
    for arm in arms:
        res[arm].pop("zero_shot_per_task")
    print(json.dumps(res, indent=1))
