"""GRPO, DAPO, CFPO and PAPO on TinyVLM, one loop (the objectives of arXiv 2606.23206 §3 and the
authors' `dp_actor.py` / `core_algos.py`, EasyR1 conventions).

A response here is one answer token sampled from the policy over the closed answer set, so each
per-token quantity below is per response. For a prompt q (image + question), G responses o_i are
sampled from pi_old with rule reward r_i = 1[o_i = gold]:
- GRPO: A_i = (r_i - mean r) / (std r + 1e-6); rho = pi_theta / pi_old;
  L = -mean[min(rho A, clip(rho, 1 - eps_l, 1 + eps_h) A)] + beta KL_k3(pi_theta || pi_ref),
  k3 = e^d - d - 1 with d = log pi_ref - log pi_theta (beta = 0.01, eps_l = eps_h = 0.2);
- DAPO: clip-higher (eps_l = 0.2, eps_h = 0.28), dynamic sampling (groups whose rewards are all equal
  carry no signal: more prompts are drawn until the batch is full of mixed groups), no reference KL;
- CFPO: log pi_cf(o_i) is computed once per rollout with the rollout (old) parameters and no
  gradient, under the cross-modal value intervention (`tinyvlm.model.value_intervention`); the loss
  subtracts gamma * mean clamp(k3, -10, 10) with d = log pi_cf - log pi_theta, so the policy's
  discrepancy from its salient-visual-cue-suppressed counterfactual is maximised (CFPO-G: on GRPO,
  gamma = 0.02; CFPO-D: on DAPO, gamma = 0.01 plus the entropy term eta = 0.03, which adds
  eta * (-mean log pi_theta), i.e. minimises entropy);
- PAPO-style baseline: the same maximised k3 but against the policy on the input image with 60 % of
  its patches masked (random, zeroed), d = log pi_theta(o | q, I_mask) - log pi_theta(o | q, I), with
  gradient through both terms (PAPO's implicit perception loss).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from paperworks.services.vlm.cfpo import task
from paperworks.services.vlm.tinyvlm.model import Intervention, TinyVLM, answer_logprobs
from paperworks.services.vlm.tinyvlm.vocab import IMAGE_SIZE, PATCH

ALGORITHMS = ("grpo", "dapo", "cfpo", "papo")


@dataclass(frozen=True)
class RLConfig:
    algorithm: str = "grpo"
    base: str = "grpo"  # the objective cfpo / papo regularise: grpo or dapo
    steps: int = 100
    prompts: int = 16  # groups per step
    group: int = 5
    learning_rate: float = 3e-4
    updates: int = 2  # optimizer steps per rollout batch (rho != 1 from the second on)
    kl_beta: float = 0.01  # GRPO's reference KL (DAPO: none)
    clip_low: float = 0.2
    clip_high: float = 0.2  # DAPO: 0.28
    gamma: float = 0.02  # weight of the maximised counterfactual / perception discrepancy
    entropy: float = 0.0  # eta: entropy minimisation (CFPO-D: 0.03)
    threshold: float = 2.0  # CFPO saliency: mu + threshold * sigma
    prior: str = "scalar"  # CFPO's image-mean prior: scalar per (sample, head) or per_dim
    mask_ratio: float = 0.6  # PAPO
    prior_strength: float = 0.8
    max_resample: int = 4  # DAPO dynamic sampling: at most this many extra draws per step
    seed: int = 0

    @property
    def objective(self) -> str:
        return self.algorithm if self.algorithm in ("grpo", "dapo") else self.base

    @classmethod
    def preset(cls, algorithm: str, base: str = "grpo", **overrides) -> RLConfig:
        """The paper's settings: DAPO (and CFPO-D / PAPO-D) with clip-higher and no reference KL;
        CFPO-D with gamma 0.01 and eta 0.03; CFPO-G and PAPO-G with gamma 0.02."""
        objective = algorithm if algorithm in ("grpo", "dapo") else base
        values = {"algorithm": algorithm, "base": base}
        if objective == "dapo":
            values |= {"kl_beta": 0.0, "clip_high": 0.28}
            if algorithm == "cfpo":
                values |= {"gamma": 0.01, "entropy": 0.03}
        return cls(**(values | overrides))


def k3(d: torch.Tensor) -> torch.Tensor:
    """Schulman's low-variance KL estimator e^d - d - 1."""
    return d.exp() - d - 1


def mask_patches(images: torch.Tensor, ratio: float, generator: torch.Generator) -> torch.Tensor:
    """PAPO's input masking: a random `ratio` of the 4 x 4 patches set to zero."""
    g = IMAGE_SIZE // PATCH
    keep = (
        (torch.rand(images.shape[0], g, g, generator=generator) >= ratio).to(images.dtype).to(images.device)
    )
    keep = keep.repeat_interleave(PATCH, 1).repeat_interleave(PATCH, 2)
    return images * keep[..., None]


@torch.no_grad()
def evaluate(model: TinyVLM, batch: task.VQABatch, device: str) -> dict:
    """Greedy accuracy over the answer set with the image and with it blanked (zeros); the visual
    dependency is the drop between them."""
    model.eval()
    images = torch.as_tensor(batch.images, device=device)
    tokens = torch.as_tensor(batch.tokens, device=device)
    answers = torch.as_tensor(batch.answers, device=device)
    full = (answer_logprobs(model(images, tokens)).argmax(-1) == answers).float().mean().item()
    blank = (
        (answer_logprobs(model(torch.zeros_like(images), tokens)).argmax(-1) == answers).float().mean().item()
    )
    return {"accuracy": full, "blank_accuracy": blank, "visual_dependency": full - blank}


class Trainer:
    """One RL run: `step()` draws a rollout batch and makes `updates` optimizer steps."""

    def __init__(self, model: TinyVLM, config: RLConfig, device: str):
        if config.algorithm not in ALGORITHMS or config.base not in ("grpo", "dapo"):
            raise ValueError(f"algorithm must be one of {ALGORITHMS} and base grpo or dapo")
        self.model, self.c, self.device = model, config, device
        self.ref = copy.deepcopy(model).eval().requires_grad_(False) if config.kl_beta > 0 else None
        self.opt = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.01)
        self.rng = np.random.default_rng(config.seed)
        self.gen = torch.Generator().manual_seed(config.seed)
        self.intervention = Intervention(config.threshold, config.prior)

    def _logp(self, images, tokens, actions, **forward) -> torch.Tensor:
        """log pi(o_i | q): (prompts, G) for the sampled answer indices `actions`."""
        return answer_logprobs(self.model(images, tokens, **forward)).gather(1, actions)

    @torch.no_grad()
    def rollout(self):
        """(images, tokens, actions, rewards, advantages, old, ref, cf) for one step's groups, and
        the number of prompts drawn (DAPO's dynamic sampling draws more)."""
        c, want = self.c, self.c.prompts
        kept, drawn = [], 0
        for _ in range(1 + (c.max_resample if c.objective == "dapo" else 0)):
            b = task.sample(self.rng, want, "train", c.prior_strength)
            drawn += want
            images, tokens = (
                torch.as_tensor(b.images, device=self.device),
                torch.as_tensor(b.tokens, device=self.device),
            )
            self.model.eval()
            probs = answer_logprobs(self.model(images, tokens)).exp()
            actions = torch.multinomial(probs.cpu(), c.group, replacement=True, generator=self.gen).to(
                self.device
            )
            rewards = (actions == torch.as_tensor(b.answers, device=self.device)[:, None]).float()
            if c.objective == "dapo":
                mixed = rewards.std(1) > 0
                images, tokens, actions, rewards = (
                    images[mixed],
                    tokens[mixed],
                    actions[mixed],
                    rewards[mixed],
                )
            kept.append((images, tokens, actions, rewards))
            if sum(len(k[0]) for k in kept) >= c.prompts or c.objective != "dapo":
                break
        images, tokens, actions, rewards = (torch.cat(x)[: c.prompts] for x in zip(*kept, strict=True))
        adv = (rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-6)
        old = self._logp(images, tokens, actions)
        ref = answer_logprobs(self.ref(images, tokens)).gather(1, actions) if self.ref is not None else None
        cf = (
            self._logp(images, tokens, actions, counterfactual=self.intervention)
            if c.algorithm == "cfpo"
            else None
        )
        return (images, tokens, actions, rewards, adv, old, ref, cf), drawn

    def step(self) -> dict:
        c = self.c
        (images, tokens, actions, rewards, adv, old, ref, cf), drawn = self.rollout()
        stats = {
            "reward": float(rewards.mean()) if len(rewards) else float("nan"),
            "groups": int(len(rewards)),
            "prompts_drawn": drawn,
        }
        if not len(rewards):
            return stats | {"loss": 0.0, "kl": 0.0, "discrepancy": 0.0}
        self.model.train()
        for _ in range(c.updates):
            logp = self._logp(images, tokens, actions)
            ratio = (logp - old).exp()
            pg = -torch.min(ratio * adv, ratio.clamp(1 - c.clip_low, 1 + c.clip_high) * adv).mean()
            loss = pg
            kl = k3(ref - logp).mean() if ref is not None else torch.zeros(())
            loss = loss + c.kl_beta * kl
            discrepancy = torch.zeros(())
            if c.algorithm == "cfpo":
                discrepancy = k3(cf - logp).clamp(-10, 10).mean()
            elif c.algorithm == "papo":
                masked = mask_patches(images, c.mask_ratio, self.gen)
                discrepancy = k3(self._logp(masked, tokens, actions) - logp).clamp(-10, 10).mean()
            loss = loss - c.gamma * discrepancy + c.entropy * (-logp.mean())
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
        self.model.eval()
        return stats | {
            "loss": float(loss.detach()),
            "kl": float(kl.detach()),
            "discrepancy": float(discrepancy.detach()),
        }


def train(
    model: TinyVLM,
    config: RLConfig,
    device: str,
    eval_batch: task.VQABatch | None = None,
    eval_every: int = 0,
    on_step: Callable[[int, dict], None] | None = None,
) -> list[dict]:
    """`config.steps` RL steps; every `eval_every` steps (and the last) the visual dependency on
    `eval_batch` joins the step's record."""
    trainer = Trainer(model, config, device)
    history = []
    for step in range(1, config.steps + 1):
        record = trainer.step()
        if eval_batch is not None and eval_every and (step % eval_every == 0 or step == config.steps):
            record["visual_dependency"] = evaluate(model, eval_batch, device)["visual_dependency"]
        history.append(record)
        if on_step is not None:
            on_step(step, record)
    return history
