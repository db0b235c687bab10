"""Reproduction 3 (Selective Deferred Routing, ICML 2026): a tiny local LM trained in this run on
generated checkable tasks (arithmetic, a string transform, table lookups) answers first; two
simulated remotes of known accuracy and price (1 and 10) stand behind it. On held-out requests
(whose lookup keys the router never saw):
- SDR's cost-quality curve has a higher normalised area than always-local, always-best, a
  confidence-threshold cascade and a query-embedding-only (MiniLM) router, all measured here on
  the same traces;
- the local LM's features beat MiniLM query embeddings for the accept decision (AUROC of
  predicting that the local answer is right).
Asserted: the full local features (hidden states + entropy / NLL) beat MiniLM on every seed, and
hidden states alone at least match it on the mean per-seed gain (both sides tuned alike on
validation, `sdr.evaluation.fit_selected`); they beat it by more than 2 standard errors of the gains on the
machine the suite was built on, not on a later one (see the test). Where they win, it is because
the local LM's training lookups draw their keys at Zipf(1.3) frequencies (`key_zipf`): knowing a
key is then graded by familiarity, as knowledge in real LLMs tracks how often an entity was seen,
and familiarity is linearly visible in the states for keys the router
never saw. With a uniformly trained random 60% of 100 keys the states carry key identity, not
knowing, and only tie MiniLM (docs/reproductions/router.md, item 3).
The job's own pipeline (`train_decider`) is what runs, exactly as the service runs it.
"""

from __future__ import annotations

import pytest
from paperworks.services.router.tasks import train_decider
from reproduction.router.experiments import sdr_params
from support import clears_its_spread

SEEDS = (0, 1, 2)
BASELINES = ("always_local", "always_best", "confidence_cascade", "query_router")


def run(seed: int) -> dict:
    params = sdr_params(seed, n_train=1500, n_validation=600, n_test=1500, local_steps=400)
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


def test_hidden_states_alone_match_query_embeddings_for_the_accept_decision(results):
    """On the machine this suite was built on, hidden states alone beat MiniLM on every seed (gains
    +0.029 / +0.019 / +0.032, asserted then as a mean over 2 standard errors). On a later machine
    (a Sapphire Rapids CPU with AMX: the same code, other float rounding) the gains read +0.024 /
    +0.004 / -0.016, and over seeds 0-7 a mean of +0.013 against 2 s.e. of 0.016: a win on six seeds
    of eight, not a reliable one (docs/reproductions/router.md, item 3). What holds on both is parity or
    better, asserted as a mean gain of at least -0.01; whether the win clears its spread is printed."""
    gains = [
        results[s]["accept_auroc"]["hidden_states_only"] - results[s]["accept_auroc"]["query_embedding"]
        for s in SEEDS
    ]
    wins, why = clears_its_spread(gains)
    print(f"accept AUROC, hidden states only - MiniLM query: {why}; clears 2 s.e.: {wins}")
    assert sum(gains) / len(gains) >= -0.01, why
