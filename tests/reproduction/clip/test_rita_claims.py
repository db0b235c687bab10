"""RITA's claims in miniature (arXiv 2607.09450), measured against baselines in the same run.

Model: the tiny CLIP trained on the shapes world from seed 0 (`rita_experiments.CI_MODEL`: 300
steps of 128 pairs). Test stream: the world of seed 5000 + 3 (seed 3 is the one CI asserts; the
settings, alpha=0.1, 32 views and `TTAConfig`'s other defaults, were chosen on seeds 1 and 2 by
`rita_experiments._main`; 60 images per stream). Attack: PGD L-inf 7 steps on the frozen model
with a plain prompt.
"""

from __future__ import annotations

import numpy as np
import ot
import pytest
import torch
from paperworks.services.clip.rita import gaussian_w2
from reproduction.clip.rita_experiments import rita_table, trained_clip

SEED, N, VIEWS = 3, 60, 32
CFG = {"views": VIEWS, "alpha": 0.1}
MARGIN = 0.2  # robust-accuracy gap asserted where the claim reproduces (validation gaps: 0.37-0.42)


@pytest.fixture(scope="module")
def acc():
    acc, _ = rita_table(
        trained_clip(), SEED, N, eps_255=(0.0, 4.0), clean_methods=["zero_shot", "rita"], **CFG
    )
    print({f"{k[0]:g}/{k[1]}": round(v, 3) for k, v in acc.items()})
    return acc


def test_rita_is_far_more_robust_than_tpt_and_zero_shot(acc):
    """PGD 4/255: RITA's robust accuracy beats TPT's and zero-shot CLIP's (validation seeds 1, 2:
    0.50 / 0.53 vs TPT 0.13 / 0.12 and zero-shot 0.10 / 0.12)."""
    assert acc[(4.0, "rita")] > acc[(4.0, "tpt")] + MARGIN
    assert acc[(4.0, "rita")] > acc[(4.0, "zero_shot")] + MARGIN


def test_rita_is_not_behind_rtpt_under_attack(acc):
    """The paper's "RITA beats R-TPT" is not resolved at CI size: RITA - R-TPT is -1, -1 images of 60
    on validation seeds 1, 2 (and +3 on seed 3). What the validation seeds support, and what is
    asserted: RITA trails R-TPT by at most 2 images."""
    assert acc[(4.0, "rita")] >= acc[(4.0, "rtpt")] - 2 / N


@pytest.mark.xfail(
    strict=True,
    reason="does not reproduce on the tiny CLIP: the views cost clean accuracy "
    "(validation: RITA 0.73 / 0.75 vs zero-shot 0.77 / 0.88)",
)
def test_rita_clean_accuracy_is_not_below_zero_shot(acc):
    assert acc[(0.0, "rita")] >= acc[(0.0, "zero_shot")]


def test_cache_term_does_not_lower_the_ot_terms_accuracy(acc):
    """The cache term's gain is within noise here (validation alpha=0.1: +1 and 0 images of 60; alpha
    >= 1 lowers robust accuracy): asserted is that at alpha=0.1 it never costs robust accuracy."""
    assert acc[(4.0, "rita")] >= acc[(4.0, "rita_no_cache")]


def test_gain_over_the_view_ensemble_is_small(acc):
    """The paper's gain over the plain view Ensemble is small (+1.1 to +1.4 points); validation here:
    +0.017 on both seeds. Asserted: within 0.1 either way under attack."""
    gain = acc[(4.0, "rita")] - acc[(4.0, "ensemble")]
    print(f"RITA - Ensemble at 4/255: {gain:+.3f}")
    assert abs(gain) <= 0.1


def test_gaussian_w2_closed_form_matches_pot():
    """Theorem 3.1: W2^2 = |mu_x - mu_z|^2 + Bures^2(S_x, S_z); against POT's exact OT (emd2) on
    samples and POT's own Gaussian formula; the mean term alone (what TPT/R-TPT shrink) misses the rest."""
    rng = np.random.default_rng(0)
    d, n = 2, 600
    mu_x, mu_z = np.array([0.0, 0.0]), np.array([1.0, 0.5])
    a = rng.standard_normal((d, d))
    cov_x, cov_z = a @ a.T + 0.2 * np.eye(d), np.diag([0.3, 2.0])
    closed = float(
        gaussian_w2(*(torch.as_tensor(v, dtype=torch.float64) for v in (mu_x, cov_x, mu_z, cov_z)))
    )
    xs = rng.multivariate_normal(mu_x, cov_x, n)
    zs = rng.multivariate_normal(mu_z, cov_z, n)
    empirical = ot.emd2(np.full(n, 1 / n), np.full(n, 1 / n), ot.dist(xs, zs))
    pot = float(ot.gaussian.bures_wasserstein_distance(mu_x, mu_z, cov_x, cov_z) ** 2)
    assert closed == pytest.approx(pot, rel=1e-6)
    assert closed == pytest.approx(empirical, rel=0.1)
    assert closed > float(((mu_x - mu_z) ** 2).sum()) + 0.2
