"""Training and evaluation for the SpatioLM reproduction: the base VLM's pre-training (LM loss on a
mix of general and spatial QA), the frozen pseudo-teacher, and the four arms the paper compares:

- "base"     (i)  the frozen base;
- "finetune" (ii) invasive: every parameter of the VLM trained on spatial QA with the LM loss;
- "lm_only"  (iii) the zero-init branch + condition projection, LM loss only;
- "spatio"   (iv) the branch + DPT head (lr x 10) + condition projection with
                  L = 0.6 L_LM + 0.2 L_token + 0.1 L_depth + 0.1 L_ray; the VLM frozen. As in
                  the authors' trainer, the head and L_token read the branch states and the LM's
                  last visual hidden states, so the 3-D losses train every W_out; one global
                  gradient-norm clip (HF Trainer's max_grad_norm = 1) over branch and head.

The teacher stands in for Depth Anything 3 (research note 7b): ground-truth depth at half
resolution with a per-scene scale/shift error, a confidence that is low at depth edges, the
ground-truth ray map, and hidden tokens from a frozen random per-patch encoder of its own depth,
rays and colours (what the relational loss distils is their Gram structure).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from paperworks.services.vlm.spatiolm import losses, qa, world
from paperworks.services.vlm.spatiolm.model import (
    GRID,
    PATCH,
    DPTHead,
    SpatialConfig,
    SpatialVLM,
    SpatioBranch,
    answer_logprobs,
)
from torch.nn import functional as F

ARMS = ("base", "finetune", "lm_only", "spatio")
TEACHER_DIM = 32


@dataclass
class Spatial:
    """A base VLM with (optionally) its branch and head."""

    vlm: SpatialVLM
    branch: SpatioBranch | None = None
    head: DPTHead | None = None

    def logits(self, images, tokens):
        if self.branch is None:
            return self.vlm(images, tokens), None
        return self.vlm(images, tokens, self.branch)

    def depth(self, images, tokens):
        """(logits, head outputs or None): the head reads the branch states and the LM's last
        visual hidden states, as in training."""
        if self.head is None:
            return self.logits(images, tokens)[0], None
        logits, states, visual = self.vlm(images, tokens, self.branch, visual=True)
        return logits, self.head(states, visual)


def half(x: np.ndarray) -> np.ndarray:
    """(..., S, S[, C]) -> 2x2 mean at half resolution."""
    s = x.shape
    spatial_last = x.ndim >= 5 or (x.ndim == 4 and s[-1] in (3, 6))
    if spatial_last:
        return x.reshape(*s[:-3], s[-3] // 2, 2, s[-2] // 2, 2, s[-1]).mean((-4, -2))
    return x.reshape(*s[:-2], s[-2] // 2, 2, s[-1] // 2, 2).mean((-3, -1))


class Teacher:
    """The frozen pseudo-teacher (see the module docstring)."""

    def __init__(self, seed: int = 0, noise: float = 0.1):
        g = np.random.default_rng(seed + 7)
        self.noise = noise
        self.w1 = torch.as_tensor(
            g.normal(0, 1 / np.sqrt(PATCH * PATCH * 2 + 9), (PATCH * PATCH * 2 + 9, 64)), dtype=torch.float32
        )
        self.w2 = torch.as_tensor(g.normal(0, 1 / 8, (64, TEACHER_DIM)), dtype=torch.float32)

    def __call__(self, batch_depth: np.ndarray, rays: np.ndarray, images: np.ndarray, rng) -> dict:
        n, f = batch_depth.shape[:2]
        scale = rng.uniform(1 - self.noise, 1 + self.noise, (n, 1, 1, 1))
        shift = rng.normal(0, self.noise, (n, 1, 1, 1))
        d = half(batch_depth) * scale + shift
        gy, gx = np.gradient(d, axis=(-2, -1))
        conf = 1 + 2 * np.exp(-np.hypot(gx, gy))
        r = half(rays)
        r[..., 3:] /= np.linalg.norm(r[..., 3:], axis=-1, keepdims=True)
        # per-patch features of the teacher's own outputs -> frozen random encoder -> tokens
        s = world.IMAGE
        dp = (np.log(batch_depth) / np.log(world.FAR)).reshape(n, f, GRID, PATCH, GRID, PATCH)
        dp = dp.transpose(0, 1, 2, 4, 3, 5).reshape(n, f, GRID * GRID, -1)
        rp = (
            rays.reshape(n, f, GRID, PATCH, GRID, PATCH, 6)
            .mean((3, 5))
            .reshape(n, f, GRID * GRID, 6)[..., 3:]
        )
        cp = images.reshape(n, f, GRID, PATCH, GRID, PATCH, 3).mean((3, 5)).reshape(n, f, GRID * GRID, 3)
        feats = np.concatenate([dp, dp**2, rp, cp, np.ones_like(cp) * (s / 24)], -1).reshape(
            n, f * GRID * GRID, -1
        )
        x = torch.as_tensor(feats, dtype=torch.float32)
        tokens = torch.tanh(x @ self.w1) @ self.w2
        t = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
        return {
            "depth": t(d),
            "depth_conf": t(conf),
            "rays": t(r),
            "ray_conf": t(np.full_like(d, np.e)),
            "tokens": tokens,
        }


def _tensors(batch: qa.Batch, idx: np.ndarray, device: str):
    return (
        torch.as_tensor(batch.images[idx], device=device),
        torch.as_tensor(batch.tokens[idx], device=device),
        torch.as_tensor(batch.answers[idx], device=device),
    )


def pretrain(
    config: SpatialConfig,
    pool: qa.Batch,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    device: str,
    on_step: Callable[[int, float], None] | None = None,
) -> SpatialVLM:
    """The base VLM: every parameter, LM loss, on `pool` (general + spatial items)."""
    torch.manual_seed(seed)
    vlm = SpatialVLM(config).to(device)
    _fit(
        vlm.parameters(),
        lambda im, tk: vlm(im, tk),
        pool,
        steps,
        lr,
        batch_size,
        seed,
        device,
        on_step,
        [vlm],
    )
    return vlm.eval()


def _fit(params, forward, pool, steps, lr, batch_size, seed, device, on_step, modules, extra=None):
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, steps // 20)))
    rng = np.random.default_rng(seed + 1)
    for m in modules:
        m.train()
    loss_value = float("nan")
    for step in range(1, steps + 1):
        idx = rng.integers(0, len(pool.answers), batch_size)
        im, tk, ans = _tensors(pool, idx, device)
        out = forward(im, tk)
        logits, states = out if isinstance(out, tuple) else (out, None)
        parts = {"lm": F.nll_loss(answer_logprobs(logits), ans)}
        if extra is not None:
            parts |= extra(idx, states, rng)
            loss = losses.total(parts)
        else:
            loss = parts["lm"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
        opt.step()
        sched.step()
        loss_value = float(loss.detach())
        if on_step is not None:
            on_step(step, loss_value)
    for m in modules:
        m.eval()
    return loss_value


def train_arm(
    base: SpatialVLM,
    arm: str,
    pool: qa.Batch,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    device: str,
    teacher: Teacher | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> Spatial:
    """One of ARMS trained on `pool` (spatial QA); the base is copied, never modified."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}")
    vlm = copy.deepcopy(base).to(device)
    if arm == "base":
        return Spatial(vlm.eval())
    if arm == "finetune":
        _fit(
            vlm.parameters(),
            lambda im, tk: vlm(im, tk),
            pool,
            steps,
            lr,
            batch_size,
            seed,
            device,
            on_step,
            [vlm],
        )
        return Spatial(vlm.eval())
    vlm.requires_grad_(False).eval()
    torch.manual_seed(seed)
    branch = SpatioBranch(base.config).to(device)
    head = DPTHead(base.config).to(device)
    groups = [{"params": list(branch.parameters()), "lr": lr}]
    extra = None
    if arm == "spatio":
        teacher = teacher or Teacher(seed)
        groups.append({"params": list(head.parameters()), "lr": 10 * lr})

        def extra(idx, states, rng):
            # the authors' trainer: the head and the relational loss read the same feature list,
            # [branch states..., the LM's last visual hidden states] (`vision_dpt_config.layer_ids`)
            states, visual = states
            t = {
                k: v.to(device)
                for k, v in teacher(pool.depth[idx], pool.rays[idx], pool.images[idx], rng).items()
            }
            p = head(states, visual)
            feats = [*states, visual]
            return {
                "token": losses.token_loss(feats, [t["tokens"]] * len(feats)),
                "depth": losses.depth_loss(p["depth"], p["depth_conf"], t["depth"], t["depth_conf"]),
                "ray": losses.ray_loss(p["rays"], p["ray_conf"], t["rays"], t["ray_conf"]),
            }

    def forward(im, tk):
        if extra is None:
            return vlm(im, tk, branch)
        logits, states, visual = vlm(im, tk, branch, visual=True)
        return logits, (states, visual)

    _fit(
        groups,
        forward,
        pool,
        steps,
        lr,
        batch_size,
        seed,
        device,
        on_step,
        [branch, head],
        extra,
    )
    return Spatial(vlm, branch.eval(), head.eval() if arm == "spatio" else None)


@torch.no_grad()
def predict(
    model: Spatial, batch: qa.Batch, device: str, chunk: int = 256
) -> tuple[np.ndarray, np.ndarray | None]:
    """(answer indices (N,), predicted half-resolution depth (N, F, S/2, S/2) or None)."""
    preds, depths = [], []
    for i in range(0, len(batch.answers), chunk):
        idx = np.arange(i, min(i + chunk, len(batch.answers)))
        im, tk, _ = _tensors(batch, idx, device)
        logits, head = model.depth(im, tk)
        preds.append(answer_logprobs(logits).argmax(1).cpu().numpy())
        if head is not None:
            depths.append(head["depth"].float().cpu().numpy())
    return np.concatenate(preds), (np.concatenate(depths) if depths else None)


def abs_rel(pred: np.ndarray, depth: np.ndarray) -> float:
    """Depth AbsRel mean(|D_hat - D| / D) against ground truth at the prediction's resolution."""
    gt = half(depth)
    return float(np.mean(np.abs(pred - gt) / gt))


def evaluate(model: Spatial, spatial: qa.Batch, general: qa.Batch, device: str) -> dict:
    """Spatial and general accuracy (overall and per type), spatial MRA over numeric types, AbsRel."""
    ps, depth = predict(model, spatial, device)
    pg, _ = predict(model, general, device)
    num = np.isin(spatial.qtypes, qa.NUMERIC)
    value = lambda k: np.array([float(qa.ANSWERS[a]) if qa.ANSWERS[a] in qa.NUMBERS else 0.0 for a in k])  # noqa: E731
    out = {
        "spatial_accuracy": float((ps == spatial.answers).mean()),
        "spatial_mra": qa.mean_relative_accuracy(value(ps[num]), value(spatial.answers[num]))
        if num.any()
        else float("nan"),
        "general_accuracy": float((pg == general.answers).mean()),
        "spatial": qa.scores(ps, spatial),
        "general": qa.scores(pg, general),
    }
    if depth is not None:
        out["depth_abs_rel"] = abs_rel(depth, spatial.depth)
    return out
