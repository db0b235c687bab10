"""Optimal-transport pieces of RITA (Zhu et al., ICML 2026, arXiv 2607.09450).

- `ot_distances`: Eq. (4)-(5): d_OT(P, Q_k) with cost C(n, m) = 1 - cos(x_n, z_m) and uniform
  marginals, solved by entropic (log-domain) Sinkhorn through the kernel library's
  `paperworks.kernels.ops.sinkhorn`, batched over the classes. We report the transport cost
  <T*, C> (the Sinkhorn distance) at the regularised optimum T*.
- `ot_loss`: the same distance made differentiable in the costs by the envelope theorem
  (gradient of <T*, C> taken with T* fixed), used by the optional OT-entropy TTA loss.
- `align_to_prototype`: Eq. (10), per-class orthogonal Procrustes
  W* = argmin_{W^T W = I} ||X W - 1 z^T||_F^2. The target 1 z^T has rank one, so every orthogonal
  W with W^T x_bar/|x_bar| = z/|z| (x_bar = the rows' sum) is a minimiser; we take the one closest to
  the identity (the rotation in the plane of x_bar and z, the identity on its complement).
  `procrustes` is the general SVD solution (W = U V^T of X^T Y), used to check the objective.
- `gaussian_w2`: Theorem 3.1, W2^2 of two Gaussians = |mu_x - mu_z|^2 + B^2(S_x, S_z) with the
  Bures term B^2(A, B) = Tr(A + B - 2 (A^1/2 B A^1/2)^1/2).
"""

from __future__ import annotations

import torch
from paperworks.kernels import ops


def cosine_cost(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """1 - cos for L2-normalised rows: x (..., n, d), z (..., m, d) -> (..., n, m)."""
    return 1.0 - x @ z.transpose(-1, -2)


def ot_distances(cost: torch.Tensor, epsilon: float = 0.05, iters: int = 100) -> torch.Tensor:
    """<T*, C> per batch element for costs (B, n, m), uniform marginals."""
    res = ops.sinkhorn(cost.detach().float(), epsilon=epsilon, max_iter=iters, tol=1e-5, check_every=10)
    return res.cost.to(cost.dtype)


def ot_loss(cost: torch.Tensor, epsilon: float = 0.05, iters: int = 100) -> torch.Tensor:
    """Differentiable Sinkhorn distance (B,): <T*, C> with the plan T* held fixed (envelope)."""
    res = ops.sinkhorn(cost.detach().float(), epsilon=epsilon, max_iter=iters, tol=1e-5, check_every=10)
    return (res.plan.to(cost.dtype) * cost).sum((-2, -1))


def align_to_prototype(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """x (n, d) cached features, z (d,) the class's text prototype -> x W* (Eq. 10), rows kept
    unit-norm. The minimal rotation taking the direction of sum(x) to that of z."""
    a = torch.nn.functional.normalize(x.sum(0), dim=0)
    b = torch.nn.functional.normalize(z, dim=0)
    c = torch.dot(a, b)
    if c <= -1 + 1e-6:  # antipodal: reflect through the hyperplane orthogonal to a - b
        v = torch.nn.functional.normalize(a - b, dim=0)
        return x - 2 * (x @ v)[:, None] * v[None]
    s = a + b
    # R = I - s s^T / (1 + c) + 2 b a^T maps a to b; rows: x R^T
    return x - (x @ s)[:, None] * s[None] / (1 + c) + 2 * (x @ a)[:, None] * b[None]


def procrustes(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The general orthogonal Procrustes solution argmin ||X W - Y||_F: W = U V^T, X^T Y = U S V^T."""
    u, _, vh = torch.linalg.svd(x.T @ y)
    return u @ vh


def _sqrtm_psd(a: torch.Tensor) -> torch.Tensor:
    w, v = torch.linalg.eigh((a + a.T) / 2)
    return (v * w.clamp(min=0).sqrt()) @ v.T


def gaussian_w2(mu_x, cov_x, mu_z, cov_z) -> torch.Tensor:
    """Squared 2-Wasserstein distance of N(mu_x, cov_x) and N(mu_z, cov_z) (Theorem 3.1)."""
    root = _sqrtm_psd(cov_x)
    bures = torch.trace(cov_x + cov_z - 2 * _sqrtm_psd(root @ cov_z @ root))
    return ((mu_x - mu_z) ** 2).sum() + bures
