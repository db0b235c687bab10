"""Reproduction 3 (Selective Deferred Routing, ICML 2026): a tiny local LM trained in this run on
generated checkable tasks (arithmetic, a string transform, table lookups) answers first; two
simulated remotes of known accuracy and price (1 and 10) stand behind it. On held-out requests
(whose lookup keys the router never saw):
- SDR's cost-quality curve has a higher normalised area than always-local, always-best, a
  confidence-threshold cascade and a query-embedding-only (MiniLM) router, all measured here on
  the same traces;
- the local LM's features beat MiniLM query embeddings for the accept decision (AUROC of
  predicting that the local answer is right).
The second claim is asserted for the full local features (hidden states + entropy / NLL). Hidden
states alone, with both sides tuned alike on validation (`sdr.fit_selected`), measured 0.818 /
0.814 / 0.714 / 0.816 / 0.885 vs MiniLM 0.818 / 0.771 / 0.732 / 0.807 / 0.875 on seeds 0-4: a tie,
a loss and three small wins, so no hidden-states-only assertion (services/router/README.md).
The job's own pipeline (`train_decider`) is what runs, exactly as the service runs it.
"""

from __future__ import annotations

import pytest
from paperworks.services.router.pipelines import train_decider
from paperworks.services.router.spec import TrainDeciderParams

SEEDS = (0, 1)
BASELINES = ("always_local", "always_best", "confidence_cascade", "query_router")


def run(seed: int) -> dict:
    params = TrainDeciderParams(
        local={"train_tiny": {"steps": 400, "seed": seed}},
        remotes=[
            {"name": "small", "price": 1.0, "accuracy": [0.9, 0.5, 0.5]},
            {"name": "large", "price": 10.0, "accuracy": [0.97, 0.97, 0.97]},
        ],
        seed=seed,
        n_train=1500,
        n_validation=600,
        n_test=1500,
    )
    return train_decider(params, lambda *_: None).summary


@pytest.fixture(scope="module")
def results(minilm):
    table = {seed: run(seed) for seed in SEEDS}
    for seed, r in table.items():
        print(
            f"\nseed {seed}: areas "
            + ", ".join(f"{k} {v:.4f}" for k, v in r["areas"].items())
            + " | accept AUROC "
            + ", ".join(f"{k} {v:.3f}" for k, v in r["accept_auroc"].items())
            + f" | local quality {r['local_quality']:.3f}"
        )
    return table


@pytest.mark.parametrize("seed", SEEDS)
def test_sdr_curve_has_the_highest_normalised_area(results, seed):
    areas = results[seed]["areas"]
    for baseline in BASELINES:
        assert areas["sdr"] > areas[baseline] + 0.005, (baseline, areas)


@pytest.mark.parametrize("seed", SEEDS)
def test_local_features_beat_query_embeddings_for_the_accept_decision(results, seed):
    auroc = results[seed]["accept_auroc"]
    assert auroc["sdr"] > auroc["query_embedding"] + 0.02, auroc
