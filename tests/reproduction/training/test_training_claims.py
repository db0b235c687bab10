"""Cornstarch's claims in miniature, each against baselines measured in the same run.

(a) Workload-balanced CP: on synthetic multimodal sequences (8k tokens, 1-4 image spans and an audio
    span), LPT's max/mean rank load is below zigzag's and uniform's for cp in {2, 4, 8}; on causal-only
    masks zigzag and LPT are ~1. CI asserts sequences from seeds 1..16; the thresholds were read off
    validation seeds 100..115. The issue's "all three ~1 on causal" does not hold for the uniform
    (contiguous) split: measured by the strict xfail below.
(b) Frozen-aware pipeline partitioning: per frozen pattern (frozen encoder, projector only, frozen
    LLM + LoRA), under the FLOP-count cost model (`costs.analytic`: deterministic, so the test does
    not read this machine's timings) the frozen-aware plan's predicted 1F1B iteration (the critical
    path) on 3 stages is at least 15% shorter than the parameter-count and layer-count plans' (1.22..
    1.53 measured). Not asserted: the gain over the 3x-forward balance (1.09..1.15 predicted; measured
    0.85..1.13x in the benchmark, within its noise: it does not reproduce). Measured iteration times
    and the profiled cost model are wall-clock: tests/benchmarks/bench_training.py, not CI.
(c) The trained model does not depend on the partition or the split: 2-process training under three
    partitions gives the single-process loss curve (1e-5), CP ring attention under uniform, zigzag
    and LPT splits equals unsplit attention (1e-10). Seed 0.
"""

from __future__ import annotations

import pytest
from paperworks.services.training.cornstarch.model import EncoderConfig, MLLMConfig

from . import experiments

CI_SEEDS = range(1, 17)
TINY = MLLMConfig(
    encoders=(EncoderConfig(tokens=8, input_dim=12, d_model=16, layers=2),),
    d_model=16,
    llm_layers=3,
    heads=2,
    vocab=16,
    text_tokens=8,
)


@pytest.fixture(scope="module")
def balance():
    return experiments.cp_balance(CI_SEEDS)


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_a_lpt_balances_multimodal_masks_better_than_zigzag_and_uniform(balance, cp):
    row = balance[f"multimodal/cp{cp}"]
    assert row["lpt"] < row["zigzag"] < row["uniform"]
    assert row["lpt"] < 1.03 and row["zigzag"] > row["lpt"] + 0.01
    assert balance[f"multimodal/cp{cp}/lpt_wins"] >= 0.9


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_a_zigzag_and_lpt_are_balanced_on_causal_masks(balance, cp):
    row = balance[f"causal/cp{cp}"]
    assert row["lpt"] < 1.02 and row["zigzag"] < 1.02


@pytest.mark.xfail(strict=True, reason="uniform contiguous chunks are not balanced on causal masks (1.5-1.9)")
def test_a_uniform_is_balanced_on_causal_masks(balance):
    assert all(balance[f"causal/cp{cp}"]["uniform"] < 1.1 for cp in (2, 4, 8))


def test_b_frozen_aware_partition_shortens_the_predicted_critical_path():
    study = experiments.partition_study(world=3, analytic=True)
    for pattern, row in study.items():
        for method in ("parameters", "layers"):
            assert row[method]["predicted_ratio"] >= 1.15, (pattern, method, row)


def test_c_same_model_under_every_partition_and_split():
    res = experiments.same_model(TINY, "frozen_encoder", [2, 4, 6], steps=4)
    assert res["reference"][-1] < res["reference"][0]  # it trains
    for losses in res["pipelines"].values():
        assert losses == pytest.approx(res["reference"], abs=1e-5)
    assert max(res["cp_max_abs_error"].values()) < 1e-10
    assert res["cp_imbalance"]["lpt"] <= res["cp_imbalance"]["uniform"]
