"""SkillNet's skill-conditioned mixture-of-experts action expert, at toy scale (Xie et al., SkillNet,
ICML 2026; code github.com/VIPL-VSU/SkillNet, `skill_moe/.../gemma_moe_skill.py`, `pi0_moe_skill.py`).

Layout (pi0.5-style): a prefix encoder reads the observation token and the instruction's word tokens
(verb and object of both subtasks); the action expert reads H action tokens (noisy action chunk x_t,
flow time t, position) that attend to themselves and to the prefix. Every FFN of the action expert is

    y_t = FFN_shared(x_t) + sum_e 1[e = argmax p] p_e FFN_e(x_t),   p = softmax(W_r a_t)       (top-1)

with the SkillNet router a_t = MHA(q = W_q x_t, k, v = skill embeddings E(s_1..s_K), padding masked):
each action token cross-attends onto the task's skill embeddings, so the routing is a function of the
skills ("soft constraint": similar skills -> similar embeddings -> similar experts). Skill embeddings
come from the hierarchy token [motion cluster, VerbNet class, verb]: E(s) = E_c + E_v + E_verb
[R: the released LIBERO config embeds flat skill ids; summing the three levels is our reading of how the
hierarchy shapes the embedding]. Load balancing (Switch-style): L_bal = E * sum_e f_e P_e, times 0.01,
averaged over layers.

Arms (same prefix, attention, width, data and budget): `skillnet`; `token_moe` (router logits
W_r x_t: token-routed MoE); `random_verb_moe` (the skill router on frozen random per-verb embeddings,
no hierarchy); `dense` (one FFN of the width of the shared + one routed expert: same active compute).

Action head: flow matching as pi0.5 (t ~ Beta(1.5, 1) * 0.999 + 0.001, x_t = t eps + (1 - t) a,
u = eps - a, L = |v(x_t, t) - u|^2; 10 Euler steps from t = 1 to 0) or plain MSE regression (`head`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import hierarchy
from .sim import ACTION_DIM, OBS_DIM, WORDS

ARMS = ("skillnet", "dense", "token_moe", "random_verb_moe")
HEADS = ("flow", "mse")


@dataclass
class PolicyConfig:
    arm: str = "skillnet"
    head: str = "flow"
    d_model: int = 32
    heads: int = 4
    layers: int = 2
    experts: int = 4
    expert_hidden: int = 32
    skill_dim: int = 32
    router_heads: int = 4
    horizon: int = 10
    flow_steps: int = 10
    balance_coef: float = 0.01

    def __post_init__(self):
        if self.arm not in ARMS:
            raise ValueError(f"arm {self.arm!r} is not one of {ARMS}")
        if self.head not in HEADS:
            raise ValueError(f"head {self.head!r} is not one of {HEADS}")
        for name in ("d_model", "heads", "layers", "experts", "expert_hidden", "skill_dim", "router_heads",
                     "horizon", "flow_steps"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.d_model % self.heads or self.skill_dim % self.router_heads:
            raise ValueError("d_model must divide by heads and skill_dim by router_heads")

    def to_dict(self) -> dict:
        return asdict(self)


class SkillEmbedding(nn.Module):
    """E(skill) from the hierarchy token (skillnet) or a frozen random vector per verb (random_verb_moe)."""

    def __init__(self, dim: int, hierarchical: bool):
        super().__init__()
        table = torch.as_tensor(hierarchy.token_table())
        self.register_buffer("tokens", table, persistent=False)
        self.hierarchical = hierarchical
        n_verbs = len(hierarchy.VERBS)
        if hierarchical:
            self.cluster = nn.Embedding(len(hierarchy.MOTION_CODE_CENTERS), dim)
            self.verbnet = nn.Embedding(len(hierarchy.VERBNET_CLASSES), dim)
            self.verb = nn.Embedding(n_verbs, dim)
            for e in (self.cluster, self.verbnet, self.verb):
                nn.init.normal_(e.weight, std=1.0 / math.sqrt(3.0))
        else:
            g = torch.Generator().manual_seed(1234)
            self.register_buffer("random", torch.randn(n_verbs, dim, generator=g))

    def forward(self, verbs: torch.Tensor) -> torch.Tensor:
        if not self.hierarchical:
            return self.random[verbs]
        t = self.tokens[verbs]
        return self.cluster(t[..., 0]) + self.verbnet(t[..., 1]) + self.verb(t[..., 2])


class MoEFFN(nn.Module):
    """Shared expert + `experts` routed experts, top-1; the router is skill cross-attention or token-only."""

    def __init__(self, cfg: PolicyConfig, skill_router: bool):
        super().__init__()
        d, h, e = cfg.d_model, cfg.expert_hidden, cfg.experts
        self.shared = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d))
        self.w1 = nn.Parameter(torch.randn(e, d, h) / math.sqrt(d))
        self.b1 = nn.Parameter(torch.zeros(e, h))
        self.w2 = nn.Parameter(torch.randn(e, h, d) / math.sqrt(h))
        self.b2 = nn.Parameter(torch.zeros(e, d))
        self.skill_router = skill_router
        self.n_experts = e
        if skill_router:
            self.q = nn.Linear(d, cfg.skill_dim)
            self.attn = nn.MultiheadAttention(cfg.skill_dim, cfg.router_heads, batch_first=True)
            self.router = nn.Linear(cfg.skill_dim, e)
        else:
            self.router = nn.Linear(d, e)
        self.last_probs: torch.Tensor | None = None
        self.last_choice: torch.Tensor | None = None

    def forward(self, x, skills, skill_pad):
        if self.skill_router:
            a, _ = self.attn(self.q(x), skills, skills, key_padding_mask=skill_pad, need_weights=False)
            logits = self.router(a)
        else:
            logits = self.router(x)
        p = logits.float().softmax(-1)                                    # (B, T, E)
        choice = p.argmax(-1)                                             # top-1
        hidden = F.gelu(torch.einsum("btd,edh->bteh", x, self.w1) + self.b1)
        out = torch.einsum("bteh,ehd->bted", hidden, self.w2) + self.b2  # every expert (tiny E)
        gate = F.one_hot(choice, self.n_experts).to(p.dtype) * p
        y = self.shared(x) + (gate.unsqueeze(-1).to(out.dtype) * out).sum(2)
        f = F.one_hot(choice, self.n_experts).float().mean((0, 1))
        balance = self.n_experts * (f * p.mean((0, 1))).sum()
        self.last_probs, self.last_choice = p.detach(), choice.detach()
        return y, balance


class Block(nn.Module):
    def __init__(self, cfg: PolicyConfig, ffn: str):
        super().__init__()
        d = cfg.d_model
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, cfg.heads, batch_first=True)
        self.kind = ffn
        if ffn == "dense":
            wide = 2 * cfg.expert_hidden
            self.ffn = nn.Sequential(nn.Linear(d, wide), nn.GELU(), nn.Linear(wide, d))
        else:
            self.ffn = MoEFFN(cfg, skill_router=ffn == "skill")

    def forward(self, x, prefix, skills=None, skill_pad=None):
        h = self.ln1(x)
        kv = h if prefix is None else torch.cat([prefix, h], 1)
        x = x + self.attn(h, kv, kv, need_weights=False)[0]
        h = self.ln2(x)
        if self.kind == "dense":
            return x + self.ffn(h), x.new_zeros(())
        y, bal = self.ffn(h, skills, skill_pad)
        return x + y, bal


class SkillPolicy(nn.Module):
    def __init__(self, cfg: PolicyConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.obs_in = nn.Sequential(nn.Linear(OBS_DIM, d), nn.GELU(), nn.Linear(d, d))
        self.words = nn.Embedding(len(WORDS), d)
        self.slots = nn.Parameter(torch.randn(5, d) * 0.02)
        self.prefix_block = Block(cfg, "dense")
        self.prefix_ln = nn.LayerNorm(d)
        self.act_in = nn.Linear(ACTION_DIM, d)
        self.time_mlp = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
        self.pos = nn.Parameter(torch.randn(cfg.horizon, d) * 0.02)
        ffn = {"skillnet": "skill", "random_verb_moe": "skill", "token_moe": "token",
               "dense": "dense"}[cfg.arm]
        self.blocks = nn.ModuleList(Block(cfg, ffn) for _ in range(cfg.layers))
        self.skill_emb = SkillEmbedding(cfg.skill_dim, cfg.arm == "skillnet") if ffn == "skill" else None
        self.out_ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, ACTION_DIM)

    def encode(self, obs, words, verbs):
        """Prefix tokens (observation + 4 instruction words) and the skill embeddings (B, K, skill_dim)."""
        tokens = torch.cat([self.obs_in(obs).unsqueeze(1), self.words(words)], 1) + self.slots
        prefix, _ = self.prefix_block(tokens, None)
        skills = self.skill_emb(verbs) if self.skill_emb is not None else None
        return self.prefix_ln(prefix), skills

    def _time(self, t):
        half = self.cfg.d_model // 2
        freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=t.device) / half)
        ang = t[:, None] * freqs[None] * 100.0
        return self.time_mlp(torch.cat([ang.sin(), ang.cos()], -1))

    def velocity(self, x_t, t, prefix, skills):
        h = self.act_in(x_t) + self.pos + self._time(t).unsqueeze(1)
        balance = h.new_zeros(())
        for blk in self.blocks:
            h, bal = blk(h, prefix, skills, None)
            balance = balance + bal
        return self.out(self.out_ln(h)), balance / len(self.blocks)

    def loss(self, obs, words, verbs, chunks) -> tuple[torch.Tensor, dict]:
        prefix, skills = self.encode(obs, words, verbs)
        b = len(obs)
        if self.cfg.head == "flow":
            t = torch.distributions.Beta(1.5, 1.0).sample((b,)).to(obs.device) * 0.999 + 0.001
            eps = torch.randn_like(chunks)
            x_t = t[:, None, None] * eps + (1 - t[:, None, None]) * chunks
            v, bal = self.velocity(x_t, t, prefix, skills)
            task = F.mse_loss(v, eps - chunks)
        else:
            zero_t = torch.zeros(b, device=obs.device)
            pred, bal = self.velocity(torch.zeros_like(chunks), zero_t, prefix, skills)
            task = F.mse_loss(pred, chunks)
        total = task + self.cfg.balance_coef * bal
        return total, {"action": float(task.detach()), "balance": float(bal.detach())}

    @torch.no_grad()
    def sample(self, obs, words, verbs, generator: torch.Generator | None = None) -> torch.Tensor:
        """An action chunk (B, H, A): 10 Euler steps of the flow from noise (flow) or the regression."""
        prefix, skills = self.encode(obs, words, verbs)
        b, shape = len(obs), (len(obs), self.cfg.horizon, ACTION_DIM)
        if self.cfg.head == "mse":
            return self.velocity(torch.zeros(shape, device=obs.device), torch.zeros(b, device=obs.device),
                                 prefix, skills)[0]
        x = torch.randn(shape, generator=generator, device="cpu").to(obs.device)
        dt = 1.0 / self.cfg.flow_steps
        for i in range(self.cfg.flow_steps):
            t = torch.full((b,), 1.0 - i * dt, device=obs.device)
            v, _ = self.velocity(x, t, prefix, skills)
            x = x - dt * v
        return x

    def moe_layers(self) -> list[MoEFFN]:
        return [blk.ffn for blk in self.blocks if isinstance(blk.ffn, MoEFFN)]


def build(cfg: PolicyConfig, seed: int, device="cpu") -> SkillPolicy:
    torch.manual_seed(seed)
    np.random.seed(seed % (2 ** 32))
    return SkillPolicy(cfg).to(device)
