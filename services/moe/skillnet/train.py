"""Training, seeded evaluation rollouts, inference and routing analysis of the SkillNet policy and its
baselines (Xie et al., SkillNet, ICML 2026). Training follows the released recipe at toy scale:
AdamW, cosine decay to 10 % of the peak rate, the flow-matching (or MSE) loss plus 0.01 x the load
balance loss; evaluation executes the first `execute` actions of each predicted chunk (receding
horizon) and scores a task as done when both subtasks' success predicates held in order.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from . import hierarchy, sim
from .policy import PolicyConfig, SkillPolicy, build

VERB_OF_SKILL = np.array([hierarchy.VERB_IDS[v] for v, _ in sim.SKILLS], dtype=np.int64)


def _tensors(obs: np.ndarray, tasks: np.ndarray, device):
    tasks = np.asarray(tasks, dtype=np.int64).reshape(-1, 2)
    return (torch.as_tensor(obs, dtype=torch.float32, device=device),
            torch.as_tensor(sim.instruction_words(tasks), device=device),
            torch.as_tensor(VERB_OF_SKILL[tasks], device=device))


def train_policy(arm: str | PolicyConfig, demos: sim.Demos, steps: int, device="cpu", *, seed: int = 0,
                 batch: int = 256, lr: float = 3e-3, policy: SkillPolicy | None = None,
                 replay: sim.Demos | None = None, progress: Callable[[int, dict], None] | None = None
                 ) -> SkillPolicy:
    """Fit a policy (a new one of `arm`, or continue `policy`) on demos for `steps` AdamW steps.
    With `replay`, half of every batch is drawn from it (few-shot fine-tuning without forgetting)."""
    if policy is None:
        cfg = arm if isinstance(arm, PolicyConfig) else PolicyConfig(arm=arm)
        policy = build(cfg, seed, device)
    if steps < 1 or len(demos) < 1:
        raise ValueError("steps and the number of demonstration samples must be >= 1")
    device = next(policy.parameters()).device
    policy.train()
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    gen = np.random.default_rng(seed + 7)
    torch.manual_seed(seed + 11)
    sources = [demos] if replay is None else [demos, replay]
    data = [(_tensors(d.obs, d.tasks, device), torch.as_tensor(d.chunks, device=device)) for d in sources]
    log: dict = {}
    for s in range(steps):
        parts = []
        for (obs, words, verbs), chunks in data:
            idx = torch.as_tensor(gen.integers(0, len(obs), batch // len(data)), device=device)
            parts.append((obs[idx], words[idx], verbs[idx], chunks[idx]))
        obs, words, verbs, chunks = (torch.cat(z) for z in zip(*parts, strict=True))
        loss, log = policy.loss(obs, words, verbs, chunks)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        sched.step()
        if progress is not None and (s % 50 == 0 or s == steps - 1):
            progress(s, log)
    policy.eval()
    return policy


def act(policy: SkillPolicy, observation, instruction, seed: int = 0) -> np.ndarray:
    """One action chunk (H, 4) for one observation (OBS_DIM,) and an instruction
    ('open drawer, then place block' or a (skill, skill) pair)."""
    obs = np.asarray(observation, dtype=np.float32).reshape(-1)
    if obs.shape != (sim.OBS_DIM,) or not np.isfinite(obs).all():
        raise ValueError(f"observation must be {sim.OBS_DIM} finite numbers, got shape {obs.shape}")
    if isinstance(instruction, str):
        task = sim.parse_task(instruction)
    else:
        try:
            task = tuple(int(i) for i in instruction)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"instruction must be a string or two skill ids, got {instruction!r}") from exc
    if task not in sim.valid_tasks(True):
        raise ValueError(f"instruction {instruction!r} is not a valid task")
    device = next(policy.parameters()).device
    g = torch.Generator().manual_seed(seed)
    chunk = policy.sample(*_tensors(obs[None], np.array([task]), device), generator=g)
    return chunk[0].float().cpu().numpy().clip(-1, 1)


@torch.no_grad()
def rollout(policy: SkillPolicy, tasks, episodes: int, seed: int, execute: int = 5, max_steps: int = 90,
            record: bool = False):
    """Seeded rollouts of `episodes` per task; returns (final world, per-step worlds if record)."""
    tasks = np.repeat(np.asarray(tasks, dtype=np.int64).reshape(-1, 2), episodes, axis=0)
    rng = np.random.default_rng(seed)
    w = sim.reset(tasks, rng)
    g = torch.Generator().manual_seed(seed)
    device = next(policy.parameters()).device
    frames = [w.copy()] if record else []
    policy.eval()
    t = 0
    while t < max_steps and not w.done.all():
        chunk = policy.sample(*_tensors(w.observation(), tasks, device), generator=g).float().cpu().numpy()
        for k in range(min(execute, policy.cfg.horizon, max_steps - t)):
            sim.step(w, chunk[:, k])
            t += 1
            if record:
                frames.append(w.copy())
    return w, frames


def evaluate(policy: SkillPolicy, tasks, episodes: int, seed: int, execute: int = 5,
             max_steps: int = 90) -> dict:
    """Success rate over seeded rollouts, overall and per task, plus first-subtask completion."""
    tasks = [tuple(int(i) for i in t) for t in tasks]
    w, _ = rollout(policy, tasks, episodes, seed, execute, max_steps)
    done = w.done.reshape(len(tasks), episodes)
    first = (w.phase >= 1).reshape(len(tasks), episodes)
    return {"success": float(done.mean()), "first_subtask": float(first.mean()), "episodes": episodes,
            "per_task": {sim.task_name(t): float(d.mean()) for t, d in zip(tasks, done, strict=True)}}


@torch.no_grad()
def routing_by_skill(policy: SkillPolicy, demos: sim.Demos, max_samples: int = 4000, seed: int = 0) -> dict:
    """Mean router distribution of the action tokens for every skill (samples grouped by the phase's
    current skill), per MoE layer: {skill name: (layers, experts) array}. A flow head is routed at
    t = 0.5 on a half-noised chunk, an MSE head on its training input (zeros, t = 0)."""
    layers = policy.moe_layers()
    if not layers:
        return {}
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(demos))[:max_samples]
    obs, tasks = demos.obs[idx], demos.tasks[idx]
    phase = obs[:, -1] > 0.5
    current = tasks[np.arange(len(tasks)), phase.astype(int)]
    device = next(policy.parameters()).device
    o, wd, vb = _tensors(obs, tasks, device)
    prefix, skills = policy.encode(o, wd, vb)
    chunks = torch.as_tensor(demos.chunks[idx], device=device)
    flow = policy.cfg.head == "flow"
    t = torch.full((len(idx),), 0.5 if flow else 0.0, device=device)
    x = 0.5 * torch.randn_like(chunks) + 0.5 * chunks if flow else torch.zeros_like(chunks)
    policy.velocity(x, t, prefix, skills)
    probs = np.stack([m.last_probs.mean(1).cpu().numpy() for m in layers], 1)   # (N, L, E)
    return {sim.skill_name(s): probs[current == s].mean(0) for s in np.unique(current)}


def _js(p: np.ndarray, q: np.ndarray) -> float:
    m = 0.5 * (p + q)

    def kl(a, b):
        return float(np.sum(a * (np.log2(np.maximum(a, 1e-12)) - np.log2(np.maximum(b, 1e-12)))))
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def routing_hierarchy_correlation(routing: dict) -> dict:
    """Over all pairs of skills with different verbs: routing similarity (1 - Jensen-Shannon divergence,
    base 2, of the mean expert distributions, averaged over layers) vs hierarchy similarity of their
    verbs; Spearman and Pearson correlations."""
    from scipy.stats import pearsonr, spearmanr
    names = sorted(routing)
    rs, hs, pairs = [], [], []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            va, vb = a.split()[0], b.split()[0]
            if va == vb:
                continue
            r = 1.0 - np.mean([_js(x, y) for x, y in zip(routing[a], routing[b], strict=True)])
            rs.append(r)
            hs.append(hierarchy.hierarchy_similarity(va, vb))
            pairs.append((a, b))
    if len(rs) < 3 or np.std(rs) == 0 or np.std(hs) == 0:
        return {"spearman": float("nan"), "pearson": float("nan"), "pairs": len(rs)}
    return {"spearman": float(spearmanr(hs, rs)[0]), "pearson": float(pearsonr(hs, rs)[0]), "pairs": len(rs),
            "routing_similarity": rs, "hierarchy_similarity": hs}


def save(policy: SkillPolicy, folder) -> None:
    """`policy.safetensors` (the state) + `policy.json` (the config)."""
    from safetensors.torch import save_file
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in policy.state_dict().items()}
    save_file(state, str(folder / "policy.safetensors"))
    (folder / "policy.json").write_text(json.dumps({"config": policy.cfg.to_dict(), "method": "skillnet"}))


def load(folder, device="cpu") -> SkillPolicy:
    from safetensors.torch import load_file
    folder = Path(folder)
    meta = json.loads((folder / "policy.json").read_text())
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise ValueError("policy.json must hold a 'config' object")
    cfg = PolicyConfig(**meta["config"])
    policy = SkillPolicy(cfg)
    policy.load_state_dict(load_file(str(folder / "policy.safetensors")))
    return policy.to(device).eval()
