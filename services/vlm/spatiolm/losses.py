"""SpatioLM's training losses (arXiv 2608.01899 §3.3; the authors' `losses/distill_3d.py`,
`losses/distill_token.py`, `swift/trainers.py`; research note 7a.5):

- L_depth = sum_p w_p |D_hat - D| / sum_p w_p + mean(gamma |D_hat - D| c_D - alpha log c_D)
            + |grad_x D_hat - grad_x D|_1 + |grad_y D_hat - grad_y D|_1,  w_p = log(teacher confidence),
            gamma = 1, alpha = 0.2;
- L_ray   = the same confidence-weighted regression and confidence term on the ray map (no gradient term);
- L_token = relational distillation: per layer, L1 between the off-diagonal entries of the cosine
            Gram matrices S S^T (student) and T T^T (teacher), averaged over layers;
- L = 0.6 L_LM + 0.2 L_token + 0.1 L_depth + 0.1 L_ray.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

WEIGHTS = {"lm": 0.6, "token": 0.2, "depth": 0.1, "ray": 0.1}
GAMMA, ALPHA = 1.0, 0.2


def _conf_regression(err: torch.Tensor, conf: torch.Tensor, teacher_conf: torch.Tensor) -> torch.Tensor:
    w = teacher_conf.log()
    weighted = (w * err).sum() / w.sum().clamp(min=1e-6)
    return weighted + (GAMMA * err * conf - ALPHA * conf.log()).mean()


def depth_loss(pred, conf, target, teacher_conf) -> torch.Tensor:
    """All (..., H, W)."""
    err = (pred - target).abs()
    gx = ((pred[..., :, 1:] - pred[..., :, :-1]) - (target[..., :, 1:] - target[..., :, :-1])).abs().mean()
    gy = ((pred[..., 1:, :] - pred[..., :-1, :]) - (target[..., 1:, :] - target[..., :-1, :])).abs().mean()
    return _conf_regression(err, conf, teacher_conf) + gx + gy


def ray_loss(pred, conf, target, teacher_conf) -> torch.Tensor:
    """pred, target (..., H, W, C); conf, teacher_conf (..., H, W)."""
    return _conf_regression((pred - target).abs().sum(-1), conf, teacher_conf)


def token_loss(students: list[torch.Tensor], teachers: list[torch.Tensor]) -> torch.Tensor:
    """Each (B, N, *): L1 between off-diagonal cosine-Gram entries, averaged over layers."""
    total = 0.0
    for s, t in zip(students, teachers, strict=True):
        s, t = F.normalize(s.float(), dim=-1), F.normalize(t.float(), dim=-1)
        gs, gt = s @ s.transpose(-1, -2), t @ t.transpose(-1, -2)
        off = ~torch.eye(gs.shape[-1], dtype=torch.bool, device=gs.device)
        total = total + (gs - gt).abs()[..., off].mean()
    return total / len(students)


def total(parts: dict[str, torch.Tensor]) -> torch.Tensor:
    return sum(WEIGHTS[k] * v for k, v in parts.items())
