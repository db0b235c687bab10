"""The VACSR method code alone (services/clip/vacsr): each step of the adapter against its formula,
the baselines' losses against their papers' forms, the retrieval metrics on hand-worked cases,
and the training loop, serialisation and refusals."""
from __future__ import annotations

import math

import pytest
import torch
from paperworks.services.clip import vacsr
from paperworks.services.clip.vacsr import baselines, metrics
from paperworks.services.clip.vacsr.model import (
    VACSRAdapter,
    VACSRConfig,
    elbo_loss,
    gaussian_nll,
    kl_to_standard_normal,
)
from sklearn.metrics import roc_auc_score
from torch.nn import functional as F

D = 8


def _adapter(**kw) -> VACSRAdapter:
    torch.manual_seed(0)
    return VACSRAdapter(VACSRConfig(feature_dim=D, hidden=16, latent=4, **({"residual_ratio": 0.0} | kw)))


def test_interaction_is_the_scaled_hadamard_product_of_normalised_features():
    a = _adapter()
    img, txt = torch.randn(3, D), torch.randn(5, D)
    s = a.interaction(img, txt)
    assert s.shape == (3, 5, D)
    v, t = F.normalize(img, dim=-1), F.normalize(txt, dim=-1)
    assert torch.allclose(s[1, 2], v[1] * t[2] * D)
    assert torch.allclose(s.sum(-1), D * v @ t.T, atol=1e-5)  # the cosine is one linear read-out
    assert torch.allclose(a.interaction_paired(img[:3], txt[:3]), torch.stack([s[i, i] for i in range(3)]))


def test_posterior_is_a_two_component_mixture_and_the_score_is_decoded_at_its_mean():
    a = _adapter()
    s = a.interaction(torch.randn(4, D), torch.randn(6, D))
    mu, logvar, alpha = a.posterior(s)
    assert mu.shape == logvar.shape == (4, 6, 2, 4) and alpha.shape == (4, 6, 2)
    assert torch.allclose(alpha.sum(-1), torch.ones(4, 6))
    mean, var = a(torch.randn(4, D), torch.randn(6, D))
    assert mean.shape == var.shape == (4, 6) and (var >= a.config.min_variance).all()
    img, txt = torch.randn(4, D), torch.randn(6, D)
    mu, _, alpha = a.posterior(a.interaction(img, txt))
    expect = a.decode((alpha[..., None] * mu).sum(-2))
    got = a(img, txt)
    assert torch.allclose(got[0], expect[0]) and torch.allclose(got[1], expect[1])


def test_nll_and_kl_are_the_closed_forms():
    y, m, v = torch.tensor([0.0, 1.0, 1.0]), torch.tensor([0.2, 0.4, 1.3]), torch.tensor([0.5, 2.0, 0.1])
    ref = -torch.distributions.Normal(m, v.sqrt()).log_prob(y)
    assert torch.allclose(gaussian_nll(y, m, v), ref)
    mu, logvar = torch.randn(5, 3), torch.randn(5, 3)
    q = torch.distributions.Normal(mu, (0.5 * logvar).exp())
    p = torch.distributions.Normal(torch.zeros(3), torch.ones(3))
    assert torch.allclose(kl_to_standard_normal(mu, logvar), torch.distributions.kl_divergence(q, p).sum(-1),
                          atol=1e-5)


def test_jensen_bound_is_above_the_monte_carlo_mixture_kl():
    """sum_k alpha_k KL[q_k || p] >= KL[sum_k alpha_k q_k || p] (Eq. 6), checked by sampling."""
    torch.manual_seed(1)
    mu = torch.tensor([[-1.5, 0.5], [1.0, -0.3]])
    logvar = torch.tensor([[-1.0, 0.2], [0.3, -0.5]])
    alpha = torch.tensor([0.3, 0.7])
    bound = float((alpha * kl_to_standard_normal(mu, logvar)).sum())
    comp = torch.distributions.Independent(torch.distributions.Normal(mu, (0.5 * logvar).exp()), 1)
    mix = torch.distributions.MixtureSameFamily(torch.distributions.Categorical(alpha), comp)
    prior = torch.distributions.Independent(torch.distributions.Normal(torch.zeros(2), torch.ones(2)), 1)
    z = mix.sample((200_000,))
    mc = float((mix.log_prob(z) - prior.log_prob(z)).mean())
    assert bound >= mc - 0.01 and bound - mc > 0.05, (bound, mc)


def test_elbo_loss_is_the_mixture_expectation_plus_beta_kl():
    a = _adapter(beta=0.3, positive_weight=2.0)
    s = a.interaction(torch.randn(3, D), torch.randn(3, D))
    y = torch.eye(3)
    loss, info = elbo_loss(a, s, y, torch.Generator().manual_seed(5))
    mu, logvar, alpha = a.posterior(s)
    eps = torch.randn(mu.shape, generator=torch.Generator().manual_seed(5))
    m, v = a.decode(mu + (0.5 * logvar).exp() * eps)
    rec = (alpha * gaussian_nll(y[..., None], m, v)).sum(-1)
    per = rec + 0.3 * (alpha * kl_to_standard_normal(mu, logvar)).sum(-1)
    w = torch.where(y > 0.5, 2.0, 1.0)
    assert torch.allclose(loss, (w * per).sum() / w.sum())
    assert set(info) == {"nll", "kl", "alpha"}


def test_learned_variance_is_higher_where_binary_labels_conflict():
    """Pairs of one 'false-negative' group carry label 1 or 0 at random for the same interaction;
    a clean group carries label 0 always: the decoded variance must come out higher on the first."""
    torch.manual_seed(0)
    a = _adapter(beta=1e-3, positive_weight=1.0)
    proto = torch.randn(2, D)
    s = torch.cat([proto[0].repeat(100, 1), proto[1].repeat(100, 1)]) + 0.05 * torch.randn(200, D)
    y = torch.cat([(torch.rand(100) < 0.5).float(), torch.zeros(100)])
    opt = torch.optim.Adam(a.parameters(), lr=3e-3)
    for _ in range(120):
        loss, _ = elbo_loss(a, s, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        mean, var = a.score_s(s)
    assert var[:100].mean() > 5 * var[100:].mean(), (var[:100].mean(), var[100:].mean())
    assert abs(float(mean[:100].mean()) - 0.5) < 0.15 and abs(float(mean[100:].mean())) < 0.1


def test_info_nce_is_clip_cross_entropy_on_one_to_one_pairs():
    logits = torch.randn(5, 5)
    ref = 0.5 * (F.cross_entropy(logits, torch.arange(5)) + F.cross_entropy(logits.T, torch.arange(5)))
    assert torch.allclose(baselines.info_nce(logits, torch.eye(5)), ref)


def test_sigmoid_loss_is_siglip():
    torch.manual_seed(0)
    ad = baselines.ResidualAdapter(baselines.AdapterConfig(feature_dim=D), "sigmoid")
    img, txt, y = torch.randn(4, D), torch.randn(4, D), torch.eye(4)
    loss, _ = ad.loss(img, txt, y)
    logits = 10.0 * ad.image(img) @ ad.text(txt).T - 10.0
    z = 2 * torch.eye(4) - 1
    assert torch.allclose(loss, -F.logsigmoid(z * logits).sum() / 4)


def test_pcme_csd_is_the_closed_form_of_the_expected_squared_distance():
    torch.manual_seed(0)
    ad = baselines.PCMEAdapter(baselines.AdapterConfig(feature_dim=D))
    mv, lv, mt, lt = ad.embed(torch.randn(3, D), torch.randn(4, D))
    d = ad.csd(mv, lv, mt, lt)
    brute = ((mv[:, None] - mt[None]) ** 2).sum(-1) + lv.exp().sum(-1)[:, None] + lt.exp().sum(-1)[None]
    assert torch.allclose(d, brute, atol=1e-5)
    score, unc = ad(torch.randn(3, D), torch.randn(4, D))
    assert score.shape == unc.shape == (3, 4) and (unc > 0).all()


def test_recall_and_rsum_on_a_hand_case():
    scores = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.3, 0.8], [0.4, 0.6, 0.1]])
    pos = torch.eye(3, dtype=torch.bool)
    m = metrics.retrieval_metrics(scores, pos)
    assert m["i2t_r1"] == pytest.approx(1 / 3)           # row 0 right; rows 1, 2 wrong
    assert m["t2i_r1"] == pytest.approx(1 / 3)           # column 0 right
    assert m["i2t_r5"] == m["t2i_r10"] == 1.0
    assert m["rsum"] == pytest.approx(100 * (2 / 3 + 4))


def test_map_at_r_counts_extra_positives_from_the_ground_truth():
    scores = torch.tensor([[0.9, 0.8, 0.1, 0.7]])
    relevant = torch.tensor([[True, False, False, True]])   # R = 2: top-2 = [0 (rel), 1 (not)]
    assert metrics.map_at_r(scores, relevant) == pytest.approx(0.5)
    m = metrics.retrieval_metrics(scores, torch.tensor([[True, False, False, False]]),
                                  torch.tensor([[1.0, 0.5, 0.0, 0.75]]), threshold=0.75)
    assert m["i2t_map_at_r"] == pytest.approx(0.5)


def test_auroc_matches_sklearn_with_ties():
    s = torch.tensor([0.1, 0.4, 0.35, 0.8, 0.4, 0.2])
    y = torch.tensor([0, 1, 0, 1, 0, 1])
    assert vacsr.auroc(s, y) == pytest.approx(roc_auc_score(y.numpy(), s.numpy()))
    assert vacsr.harmonic_mean(0.8, 0.4) == pytest.approx(2 * 0.32 / 1.2)
    with pytest.raises(ValueError, match="both"):
        vacsr.auroc(s, torch.ones(6))


def test_swap_captions_reassigns_exactly_the_fraction():
    labels = torch.arange(100)
    noisy = vacsr.swap_captions(labels, 0.2, seed=3)
    assert int((noisy != labels).sum()) == 20
    assert sorted(noisy.tolist()) == list(range(100))     # a permutation of the same images
    assert torch.equal(vacsr.swap_captions(labels, 0.0, seed=3), labels)


def _rotated_world(n, seed):
    """Text features are a fixed rotation of the image features' latent plus noise: zero-shot
    cosine is poor, an adapter can learn the alignment."""
    g = torch.Generator().manual_seed(seed)
    latent = torch.randn(n, D, generator=g)
    rot = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(99)))[0]
    img = latent + 0.1 * torch.randn(n, D, generator=g)
    txt = 0.6 * latent @ rot + 0.4 * latent + 0.1 * torch.randn(n, D, generator=g)
    return img, txt, torch.arange(n)


@pytest.mark.parametrize("kind", ["vacsr", "infonce", "sigmoid", "pcme"])
def test_every_adapter_trains_past_zero_shot_and_round_trips(kind):
    torch.manual_seed(0)
    train, val = _rotated_world(256, 0), _rotated_world(64, 1)
    zero, _ = vacsr.train_adapter("zero_shot", *train, val=val)
    options = {"hidden": 32, "latent": 4, "positive_weight": 8.0} if kind == "vacsr" else {"ratio": 0.5}
    cfg = vacsr.TrainConfig(epochs=10, batch_size=32, learning_rate=3e-3, patience=10)
    ad, hist = vacsr.train_adapter(kind, *train, val=val, config=cfg, options=options)
    assert len(hist) == 10 and all(math.isfinite(h["loss"]) for h in hist)
    ours = vacsr.evaluate(ad, *val)["rsum"]
    base = vacsr.evaluate(zero, *val)["rsum"]
    assert ours == pytest.approx(max(h["val_rsum"] for h in hist))   # the best epoch is kept
    assert ours > base + 20, (kind, ours, base)
    meta, state = vacsr.adapter_payload(ad)
    again = vacsr.load_adapter(meta, state)
    m1, v1 = vacsr.score_pairs(ad, val[0], val[1])
    m2, v2 = vacsr.score_pairs(again, val[0], val[1])
    assert torch.allclose(m1, m2) and (v1 is None) == (v2 is None) == (kind in ("infonce", "sigmoid"))


def test_score_pairs_of_vacsr_is_the_diagonal_of_the_pair_matrix():
    a = _adapter()
    img, txt = torch.randn(5, D), torch.randn(5, D)
    mean, var = vacsr.score_pairs(a, img, txt)
    full_m, full_v = vacsr.similarity(a, img, txt, chunk=2)
    assert torch.allclose(mean, full_m.diagonal(), atol=1e-5)
    assert torch.allclose(var, full_v.diagonal(), atol=1e-5)


def test_refusals():
    img, txt = torch.randn(4, D), torch.randn(4, D)
    with pytest.raises(ValueError, match="kind"):
        vacsr.train_adapter("nope", img, txt, torch.arange(4))
    with pytest.raises(ValueError, match="features"):
        vacsr.train_adapter("vacsr", img, torch.randn(4, D + 1), torch.arange(4))
    with pytest.raises(ValueError, match="labels"):
        vacsr.train_adapter("vacsr", img, txt, torch.tensor([0, 1, 2, 4]))
    with pytest.raises(ValueError, match="finite"):
        vacsr.train_adapter("vacsr", img, txt.clone().fill_(float("nan")), torch.arange(4))
    with pytest.raises(ValueError, match="shape"):
        vacsr.score_pairs(_adapter(), img, torch.randn(3, D))
    with pytest.raises(ValueError):
        VACSRConfig(feature_dim=D, beta=-1)
    with pytest.raises(ValueError, match="fraction"):
        vacsr.swap_captions(torch.arange(4), 1.5, 0)


def test_several_captions_per_image_are_all_positives():
    """The COCO layout: labels give each caption's image; a batch's label matrix marks every
    caption of an image, InfoNCE spreads the target over them, training runs on it."""
    labels = torch.tensor([0, 0, 1, 2, 2, 2])
    y = vacsr.pair_labels(torch.tensor([0, 2]), labels)
    assert y.tolist() == [[1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]]
    logits = torch.randn(2, 6)
    expect_i2t = -(y / y.sum(1, keepdim=True) * F.log_softmax(logits, 1)).sum(1).mean()
    cols = y.sum(0) > 0
    expect_t2i = -(y[:, cols] * F.log_softmax(logits[:, cols], 0)).sum(0).mean()
    assert torch.allclose(baselines.info_nce(logits, y), 0.5 * (expect_i2t + expect_t2i))
    img, txt = torch.randn(3, D), torch.randn(6, D)
    for kind in ("vacsr", "infonce"):
        ad, hist = vacsr.train_adapter(kind, img, txt, labels, val=(img, txt, labels),
                                       config=vacsr.TrainConfig(epochs=2, batch_size=4))
        assert len(hist) == 2 and math.isfinite(hist[-1]["loss"])
        assert vacsr.evaluate(ad, img, txt, labels)["i2t_r10"] == 1.0
