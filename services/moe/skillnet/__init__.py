"""SkillNet: hierarchical skills + a skill-conditioned mixture-of-experts action expert for
vision-language-action policies (Xie et al., ICML 2026; OpenReview CPuJWWgka2; code
github.com/VIPL-VSU/SkillNet), in miniature: a vectorised 2-D manipulation world with scripted
experts (`sim`), the released motion-code hierarchy tokenizer (`hierarchy`), the policy with its
baselines (`policy`: skillnet | dense | token_moe | random_verb_moe), training / seeded evaluation /
routing analysis / safetensors files (`train`) and PNG rendering (`render`). Pure PyTorch + NumPy.

API for the service:
    demos = make_demonstrations(tasks, n, seed)               # tasks: [(skill, skill)] or instructions
    policy = train_policy(arm, demos, steps, device, progress=None)
    evaluate(policy, tasks, episodes, seed) -> {"success", "first_subtask", "per_task", ...}
    act(policy, observation (26,), "open drawer, then place block") -> (10, 4) action chunk
    render_rollout(policy, task, seed) -> [PNG bytes]
    save(policy, folder) / load(folder, device)               # policy.safetensors + policy.json
"""
from __future__ import annotations

from . import hierarchy, sim
from .policy import ARMS, HEADS, PolicyConfig, SkillPolicy
from .render import render_frames, render_world
from .sim import (
    FEW_SHOT_TASKS,
    OBS_DIM,
    SKILLS,
    ZERO_SHOT_HELD_OUT,
    Demos,
    few_shot_tasks,
    parse_task,
    task_name,
    valid_tasks,
    zero_shot_split,
)
from .train import (
    act,
    evaluate,
    load,
    rollout,
    routing_by_skill,
    routing_hierarchy_correlation,
    save,
    train_policy,
)


def _task_ids(tasks) -> list[tuple[int, int]]:
    out = []
    for t in tasks:
        task = parse_task(t) if isinstance(t, str) else tuple(int(i) for i in t)
        if task not in valid_tasks(True):
            raise ValueError(f"task {t!r} is not a valid composition")
        out.append(task)
    if not out:
        raise ValueError("tasks must name at least one task")
    return out


def make_demonstrations(tasks, n: int, seed: int, horizon: int = 10, noise: float = 0.3) -> Demos:
    """n scripted-expert episodes per task (instruction strings or skill-id pairs)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    return sim.make_demonstrations(_task_ids(tasks), n, seed, horizon, noise)


def render_rollout(policy: SkillPolicy, task, seed: int = 0, every: int = 2, size: int = 160) -> list[bytes]:
    """PNG frames of one seeded policy rollout of `task`."""
    _, frames = rollout(policy, _task_ids([task]), 1, seed, record=True)
    return render_frames(frames, 0, every, size)


__all__ = ["ARMS", "FEW_SHOT_TASKS", "HEADS", "OBS_DIM", "SKILLS", "ZERO_SHOT_HELD_OUT", "Demos",
           "PolicyConfig", "SkillPolicy", "act", "evaluate", "few_shot_tasks", "hierarchy", "load",
           "make_demonstrations", "parse_task", "render_frames", "render_rollout", "render_world", "rollout",
           "routing_by_skill", "routing_hierarchy_correlation", "save", "sim", "task_name", "train_policy",
           "valid_tasks", "zero_shot_split"]
