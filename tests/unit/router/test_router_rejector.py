"""Rejector training, MILD's validation search, the synthetic mixture and the text families."""

from __future__ import annotations

import numpy as np
import torch
from paperworks.services.router.data import PromptPool, SyntheticMixture, TextFamilies
from paperworks.services.router.data.text_families import FAMILIES
from paperworks.services.router.mild.deferral import best_frequencies
from paperworks.services.router.mild.rejector import (
    RejectorConfig,
    costs_of,
    coverage_curve,
    fit_logit_adjusted,
    fit_mild,
    fit_rejector,
    fit_rejector_snapshots,
    fit_two_stage_ce,
    mild_margins,
)

FAST = RejectorConfig(steps=60)


def test_mixture_imbalance_sets_how_often_each_agent_is_best():
    mixture = SyntheticMixture(imbalance=50.0, seed=3)
    p = mixture.proportions()
    assert abs(p[0] / p[-1] - 50) < 1e-9
    data = mixture.sample(20_000, 0)
    freq = best_frequencies(costs_of(data))
    assert freq[0] > freq[1] > freq[2] > freq[3]
    assert 25 < freq[0] / freq[3] < 100  # mostly the owners are best; label noise blurs it a little
    again = mixture.sample(20_000, 0)
    np.testing.assert_array_equal(data.features, again.features)
    np.testing.assert_array_equal(mixture.centers(), SyntheticMixture(imbalance=2.0, seed=3).centers())


def test_training_lowers_the_surrogate_and_is_repeatable():
    data = SyntheticMixture(imbalance=10, seed=0).sample(400, 0)
    first, second = fit_rejector(data, FAST), fit_rejector(data, FAST)
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
    untrained = fit_rejector(data, RejectorConfig(steps=1))
    costs = costs_of(data)
    assert (
        costs[np.arange(len(data)), first.choose(data.features)].mean()
        < costs[np.arange(len(data)), untrained.choose(data.features)].mean()
    )


def test_mild_search_keeps_the_best_validation_scale_and_zero_is_the_baseline():
    mixture = SyntheticMixture(imbalance=30, seed=1)
    train, val = mixture.sample(600, 0), mixture.sample(300, 1)
    mild = fit_mild(train, val, FAST, scales=(0.0, 2.0))
    assert [s["scale"] for s in mild.selection] == [0.0, 2.0]
    best = min(mild.selection, key=lambda s: s["val_balanced_deferral_loss"])
    assert mild.scale == best["scale"]
    only_zero = fit_mild(train, val, FAST, scales=(0.0,))
    ce = fit_two_stage_ce(train, FAST)
    np.testing.assert_array_equal(only_zero.choose(val.features), ce.choose(val.features))


def test_logit_adjusted_baseline_is_tuned_like_mild_and_tau_zero_is_plain_ce():
    mixture = SyntheticMixture(imbalance=30, seed=1)
    train, val = mixture.sample(600, 0), mixture.sample(300, 1)
    la = fit_logit_adjusted(train, val, FAST, taus=(0.0, 1.0))
    assert [s["tau"] for s in la.selection] == [0.0, 1.0]
    assert la.scale == min(la.selection, key=lambda s: s["val_balanced_deferral_loss"])["tau"]
    only_zero = fit_logit_adjusted(train, val, FAST, taus=(0.0,))
    ce = fit_two_stage_ce(train, FAST)
    np.testing.assert_array_equal(only_zero.choose(val.features), ce.choose(val.features))
    # the adjustment shifts the rare agents' scores up at inference (trained against tau log pi)
    strong = fit_logit_adjusted(train, val, FAST, taus=(2.0,))
    rare = np.argmin(best_frequencies(costs_of(train)))
    assert (strong.choose(val.features) == rare).mean() > (ce.choose(val.features) == rare).mean()


def test_snapshots_of_one_run_are_exactly_the_shorter_fits():
    data = SyntheticMixture(imbalance=10, seed=2).sample(300, 0)
    margins = mild_margins(data, (0.0, 1.0), 0.5)
    snaps = fit_rejector_snapshots(data, FAST, margins, None, (20, 60))
    for steps in (20, 60):
        alone = fit_rejector(data, RejectorConfig(steps=steps), margins[1])
        for a, b in zip(snaps[steps][1].state_dict().values(), alone.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b)


def test_coverage_curve_spans_zero_to_full_coverage():
    data = SyntheticMixture(imbalance=10, seed=0).sample(300, 0)
    curve = coverage_curve(fit_rejector(data, FAST), data)
    coverages = [p["coverage"] for p in curve]
    assert min(coverages) == 0.0 and max(coverages) == 1.0
    assert any(p["offset"] == 0.0 for p in curve)


def test_prompt_pool_keeps_splits_disjoint_and_families_follow_the_imbalance():
    pool = PromptPool.generate(40, seed=0)
    texts_by_part = [{t for t, p in zip(pool.texts, pool.parts, strict=True) if p == k} for k in range(3)]
    assert not (texts_by_part[0] & texts_by_part[2]) and not (texts_by_part[0] & texts_by_part[1])
    pool = pool.with_features(np.random.default_rng(0).normal(size=(len(pool.texts), 5)))
    data = TextFamilies(pool, imbalance=20, seed=0).sample(5000, 0)
    counts = np.bincount(data.groups, minlength=len(FAMILIES))
    assert 10 < counts[0] / counts[-1] < 40
    assert data.features.shape == (5000, 5) and set(data.texts) <= texts_by_part[0]
