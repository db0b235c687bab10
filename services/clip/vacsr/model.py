"""VACSR: Variational Adapter for Cross-modal Similarity Representation.

Paper: W. Wei, Z. Gui, D. Peng, T. Ye, H. Wu, "Variational Adapter for Cross-modal Similarity
Representation", ICML 2026 (arXiv 2605.30968; OpenReview KqdKC41nd3). No code was released; this
follows the method as described in the paper's abstract and the paper note (research note
methods-vision.md section 6a). Choices the sources leave open are marked [R].

The CLIP encoders stay frozen; only this adapter is trained, on the frozen features of a pair:

1. Feature interaction: s_ij = v_i (.) t_j, the Hadamard product of the L2-normalised frozen
   image and text features (normalisation [R]; the product is scaled by the feature dimension D so
   that its entries are O(1) and its sum is D cos(v_i, t_j)). [R] A CLIP-Adapter residual block
   per modality before the product (residual_ratio r: r MLP(f) + (1 - r) f; r = 0 is the plain
   frozen product), the same block the InfoNCE/sigmoid baselines train: the Hadamard product alone
   only reweights the frozen dimensions and cannot re-align the towers, so without it a
   comparison would measure the architecture, not the objective.
2. Variational encoder: a two-component Gaussian-mixture posterior
   q_phi(z | s) = sum_k alpha_k N(z; mu_k(s), diag sigma_k^2(s)), k = 1, 2, with learnable mixture
   weights alpha = softmax(logits) ([R]: the logits are a learned linear head of the encoder's
   hidden state, so the components can specialise on "match" vs "mismatch" pairs).
3. Reparameterised samples z_k = mu_k + sigma_k * eps, one per component.
4. Decoder p_theta(y | z) = N(y; m(z), v(z)): the mean and variance of the similarity score.
5. Reconstruction: the heteroscedastic Gaussian negative log-likelihood of the binary label
   y_ij in {0, 1}, (y - m)^2 / (2 v) + 1/2 log v + 1/2 log 2 pi, in expectation under the mixture:
   sum_k alpha_k NLL(y | z_k) (exact for a mixture, one sample per component). A large v
   down-weights the squared error of a pair, which is how labelled negatives that are semantically
   positive (false negatives) stop pulling the scores apart.
6. KL regulariser: the mixture KL to N(0, I) has no closed form; its Jensen upper bound
   KL[sum_k alpha_k q_k || p] <= sum_k alpha_k KL[q_k || p] is used, each term in closed form.
7. Objective: minimise -ELBO = E_q[NLL] + beta * KL_bound, averaged over all B_i x B_t pairs of a
   batch (label 1 where the caption belongs to the image, else 0).
8. Inference: the similarity score is the decoded mean at the posterior mean,
   m(z_bar), z_bar = sum_k alpha_k mu_k; its uncertainty is the decoded variance v(z_bar).

Not implemented: the ICLR version's "distributional optimisation loss" (not described in the
sources) and the paper's gradient analysis (theory, nothing to run).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .baselines import Residual

LOG_2PI = math.log(2 * math.pi)


@dataclass(frozen=True)
class VACSRConfig:
    """Adapter shape and objective. `beta` weighs the KL bound (Eq. 7); `min_variance` floors the
    decoded variance so that the NLL stays bounded below on confidently separated pairs;
    `positive_weight` multiplies the loss of labelled-positive pairs (1 = the plain mean over pairs);
    `residual_ratio` > 0 puts a CLIP-Adapter residual block per modality before the interaction.
    The defaults are the setting chosen on the reproduction's validation seed (batch 32 there)."""

    feature_dim: int
    hidden: int = 64
    latent: int = 8
    components: int = 2
    beta: float = 1e-2
    min_variance: float = 1e-3
    positive_weight: float = 16.0
    residual_ratio: float = 0.5
    reduction: int = 4

    def __post_init__(self):
        if self.feature_dim < 1 or self.hidden < 1 or self.latent < 1:
            raise ValueError("feature_dim, hidden and latent must be positive")
        if self.components < 1:
            raise ValueError("components must be at least 1")
        if self.beta < 0 or self.min_variance <= 0 or self.positive_weight <= 0:
            raise ValueError("beta must be >= 0, min_variance and positive_weight > 0")
        if not 0.0 <= self.residual_ratio <= 1.0 or self.reduction < 1:
            raise ValueError("residual_ratio must lie in [0, 1] and reduction be positive")

    def to_dict(self) -> dict:
        return asdict(self)


class VACSRAdapter(nn.Module):
    """The variational similarity adapter over frozen (image, text) features."""

    kind = "vacsr"

    def __init__(self, config: VACSRConfig):
        super().__init__()
        self.config = config
        d, h, z, k = config.feature_dim, config.hidden, config.latent, config.components
        self.encoder = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, h), nn.GELU())
        self.mu = nn.Linear(h, k * z)
        self.logvar = nn.Linear(h, k * z)
        self.mix = nn.Linear(h, k)
        self.decoder = nn.Sequential(nn.Linear(z, h), nn.GELU(), nn.Linear(h, 2))
        if config.residual_ratio > 0:
            self.image = Residual(d, config.reduction, config.residual_ratio)
            self.text = Residual(d, config.reduction, config.residual_ratio)
        else:
            self.image = self.text = None

    def _features(self, img: torch.Tensor, txt: torch.Tensor):
        if self.image is None:
            return F.normalize(img, dim=-1), F.normalize(txt, dim=-1)
        return self.image(img), self.text(txt)

    # 1. interaction -------------------------------------------------------------------------
    def interaction(self, img: torch.Tensor, txt: torch.Tensor) -> torch.Tensor:
        """s_ij = v_i (.) t_j for every pair: (B_i, B_t, D), scaled by D."""
        v, t = self._features(img, txt)
        return v[:, None, :] * t[None, :, :] * self.config.feature_dim

    def interaction_paired(self, img: torch.Tensor, txt: torch.Tensor) -> torch.Tensor:
        """s_i = v_i (.) t_i for row-aligned pairs: (N, D)."""
        v, t = self._features(img, txt)
        return v * t * self.config.feature_dim

    # 2. posterior -----------------------------------------------------------------------------
    def posterior(self, s: torch.Tensor):
        """Mixture posterior of z given s (..., D): means and log-variances (..., K, Z) and the
        mixture weights alpha (..., K)."""
        k, z = self.config.components, self.config.latent
        hidden = self.encoder(s)
        mu = self.mu(hidden).unflatten(-1, (k, z))
        logvar = self.logvar(hidden).unflatten(-1, (k, z)).clamp(-8.0, 8.0)
        alpha = torch.softmax(self.mix(hidden), dim=-1)
        return mu, logvar, alpha

    # 4. decoder -------------------------------------------------------------------------------
    def decode(self, z: torch.Tensor):
        """Mean and variance of the similarity score given z (..., Z)."""
        out = self.decoder(z)
        mean = out[..., 0]
        variance = self.config.min_variance + F.softplus(out[..., 1])
        return mean, variance

    # 8. inference -----------------------------------------------------------------------------
    def score_s(self, s: torch.Tensor):
        """(mean, variance) decoded at the mixture's posterior mean z_bar = sum_k alpha_k mu_k."""
        mu, _, alpha = self.posterior(s)
        z_bar = (alpha[..., None] * mu).sum(-2)
        return self.decode(z_bar)

    def forward(self, img: torch.Tensor, txt: torch.Tensor):
        """(mean, variance), each (B_i, B_t), for every image-text pair."""
        return self.score_s(self.interaction(img, txt))

    def score_paired(self, img: torch.Tensor, txt: torch.Tensor):
        """(mean, variance), each (N,), for row-aligned pairs."""
        return self.score_s(self.interaction_paired(img, txt))

    # 3, 5-7. objective --------------------------------------------------------------------------
    def loss(self, img: torch.Tensor, txt: torch.Tensor, labels: torch.Tensor,
             generator: torch.Generator | None = None) -> tuple[torch.Tensor, dict]:
        """-ELBO averaged over the B_i x B_t pairs; `labels` (B_i, B_t) in {0, 1}."""
        s = self.interaction(img, txt)
        return elbo_loss(self, s, labels.to(s.dtype), generator)


def gaussian_nll(y: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    """Heteroscedastic Gaussian NLL, (y - m)^2 / (2 v) + 1/2 log v + 1/2 log 2 pi (step 5)."""
    return 0.5 * (y - mean) ** 2 / variance + 0.5 * torch.log(variance) + 0.5 * LOG_2PI


def kl_to_standard_normal(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL[N(mu, diag e^logvar) || N(0, I)], summed over the last dimension."""
    return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(-1)


def elbo_loss(adapter: VACSRAdapter, s: torch.Tensor, y: torch.Tensor,
              generator: torch.Generator | None = None) -> tuple[torch.Tensor, dict]:
    """-ELBO of steps 3, 5, 6, 7 on interactions s (..., D) with labels y (...)."""
    mu, logvar, alpha = adapter.posterior(s)                                # (..., K, Z), (..., K)
    eps = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype) \
        if generator is not None else torch.randn_like(mu)
    z = mu + torch.exp(0.5 * logvar) * eps                                  # step 3
    mean, variance = adapter.decode(z)                                      # (..., K)
    rec = (alpha * gaussian_nll(y[..., None], mean, variance)).sum(-1)      # step 5
    kl = (alpha * kl_to_standard_normal(mu, logvar)).sum(-1)                # step 6, Jensen bound
    per_pair = rec + adapter.config.beta * kl                               # step 7
    weight = torch.where(y > 0.5, adapter.config.positive_weight, 1.0)
    loss = (weight * per_pair).sum() / weight.sum()
    with torch.no_grad():
        info = {"nll": float(rec.mean()), "kl": float(kl.mean()),
                "alpha": [float(a) for a in alpha.reshape(-1, alpha.shape[-1]).mean(0)]}
    return loss, info
