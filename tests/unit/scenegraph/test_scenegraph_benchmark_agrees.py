"""What CI asserts in tests/reproduction/scenegraph holds at benchmark scale too (issue 26, items 5 and 10).

The reproduction tests run one scene seed (0) at test scale; the committed benchmark
(tests/benchmarks/results/scenegraph.json: 600 training and 600 test scenes, 20 epochs, seeds 0, 1, 2; the
first world on one relation-training seed per variant, the occlusion world on three) is the evidence at the
larger scale. Every comparison in `experiments.ASSERTED` must hold there on every seed, and with its mean
lead at least two standard deviations (of the per-seed lead) above its margin: a margin over the seed
noise, not a lucky seed. Every comparison the tests only report (`experiments.REPORTED`) is measured here
as a strict xfail: it does not hold at benchmark scale, and if a re-run benchmark says it does, this fails
and the README, the tests and the docs must be brought in line. Reads the committed results; trains nothing.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from reproduction.scenegraph import experiments

RESULTS = Path(experiments.__file__).resolve().parents[2] / "benchmarks" / "results" / "scenegraph.json"
NOISE_SDS = 2.0


def benchmark_leads(results: dict, comparison: experiments.Comparison) -> list[float]:
    """The comparison's lead on each benchmark seed."""
    world = results if comparison.world == "first" else results["occlusion_world"]
    return [comparison.lead(world["per_seed"][str(seed)].__getitem__) for seed in world["seeds"]]


def holds_over_the_noise(leads: list[float], margin: float) -> bool:
    """On every seed, and the mean lead at least `NOISE_SDS` standard deviations above the margin."""
    return min(leads) >= margin and float(np.mean(leads)) - NOISE_SDS * float(np.std(leads, ddof=1)) >= margin


@pytest.fixture(scope="module")
def results():
    return json.loads(RESULTS.read_text())


def test_the_benchmark_ran_both_worlds_on_three_seeds(results):
    assert results["seeds"] == [0, 1, 2] and results["occlusion_world"]["seeds"] == [0, 1, 2]
    assert set(experiments.ASSERTED) | set(experiments.REPORTED) == set(experiments.COMPARISONS)
    assert set(experiments.ASSERTED) <= set(experiments.COMPARISONS)


@pytest.mark.parametrize("name", experiments.ASSERTED)
def test_what_ci_asserts_holds_at_benchmark_scale(results, name):
    comparison = experiments.COMPARISONS[name]
    leads = benchmark_leads(results, comparison)
    assert holds_over_the_noise(leads, comparison.margin), (comparison.claim, [round(x, 3) for x in leads])


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xfail(
    strict=True, reason="does not hold at benchmark scale: reported, not asserted (README claims table)"))
    for name in experiments.REPORTED])
def test_what_ci_only_reports_does_not_hold_at_benchmark_scale(results, name):
    comparison = experiments.COMPARISONS[name]
    leads = benchmark_leads(results, comparison)
    assert holds_over_the_noise(leads, comparison.margin), (comparison.claim, [round(x, 3) for x in leads])


def test_the_noise_rule_tells_a_margin_from_a_lucky_seed():
    assert holds_over_the_noise([0.04, 0.05, 0.06], 0.02)
    assert not holds_over_the_noise([0.01, 0.05, 0.06], 0.02)  # one seed below
    assert not holds_over_the_noise([0.021, 0.08, 0.14], 0.02)  # every seed above, the spread wide
