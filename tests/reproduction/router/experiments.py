"""The router's experiment drivers, shared by its reproduction tests and its benchmark.

- `compare_ce_and_mild`: the two-stage CE baseline and MILD fitted on the same splits;
- `GRADED_LOOKUPS` and `sdr_params`: the SDR reproduction's suite and job parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

from paperworks.services.router.mild.deferral import DeferralData
from paperworks.services.router.mild.metrics import deferral_report
from paperworks.services.router.mild.rejector import (
    DEFAULT_SCALES,
    RejectorConfig,
    costs_of,
    fit_mild,
    fit_two_stage_ce,
)
from paperworks.services.router.spec import TrainDeciderParams

# The SDR reproduction's and benchmark's suite: every one of 200 lookup keys is in the local LM's
# training lookups, drawn at Zipf(1.3) frequencies, so knowing a key is graded by exposure.
GRADED_LOOKUPS = {"lookup_keys": 200, "known_fraction": 1.0, "key_zipf": 1.3}


def compare_ce_and_mild(
    train: DeferralData,
    validation: DeferralData,
    test: DeferralData,
    config: RejectorConfig,
    scales: Sequence[float] = DEFAULT_SCALES,
) -> dict[str, dict]:
    """The two-stage CE baseline and MILD fitted on the same splits: each one's test deferral report
    and margin scale (the comparison the reproduction tests and the benchmark make)."""
    out = {}
    for name, fitted in (("ce", fit_two_stage_ce(train, config)),
                         ("mild", fit_mild(train, validation, config, scales))):
        report = deferral_report(fitted.choose(test.features), costs_of(test), test.errors)
        out[name] = {**report, "scale": fitted.scale}
    return out


def sdr_params(
    seed: int, n_train: int, n_validation: int, n_test: int, local_steps: int
) -> TrainDeciderParams:
    """A TrainDecider job on `GRADED_LOOKUPS`: a tiny local LM trained `local_steps` steps, and two
    simulated remotes priced 1 and 10."""
    return TrainDeciderParams(
        local={"train_tiny": {"steps": local_steps, "seed": seed}},
        tasks=GRADED_LOOKUPS,
        remotes=[
            {"name": "small", "price": 1.0, "accuracy": [0.9, 0.5, 0.5]},
            {"name": "large", "price": 10.0, "accuracy": [0.97, 0.97, 0.97]},
        ],
        seed=seed,
        n_train=n_train,
        n_validation=n_validation,
        n_test=n_test,
    )
