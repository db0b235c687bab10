"""The router's experiment drivers, shared by its reproduction tests and its benchmark.

- `compare_ce_and_mild`: the two-stage CE baseline, the logit-adjusted CE baseline and MILD fitted on
  the same splits with the same budget;
- `validation_curve` / `choose_budget`: how that budget was chosen (validation seeds only);
- `GRADED_LOOKUPS` and `sdr_params`: the SDR reproduction's suite and job parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from paperworks.services.router.mild.deferral import DeferralData
from paperworks.services.router.mild.metrics import balanced_deferral_loss, deferral_report
from paperworks.services.router.mild.rejector import (
    DEFAULT_SCALES,
    DEFAULT_TAUS,
    RejectorConfig,
    costs_of,
    fit_logit_adjusted,
    fit_mild,
    fit_rejector_snapshots,
    fit_two_stage_ce,
    mild_margins,
    tau_adjustments,
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
    taus: Sequence[float] = DEFAULT_TAUS,
) -> dict[str, dict]:
    """Plain two-stage CE ("ce"), logit-adjusted CE ("la", tau tuned on validation like MILD's scale)
    and MILD fitted on the same splits with the same config: each one's test deferral report and its
    chosen scale / tau (the comparison the reproduction tests and the benchmark make). The report has
    the natural-distribution `deferral_loss` next to the `balanced_deferral_loss`."""
    out = {}
    for name, fitted in (("ce", fit_two_stage_ce(train, config)),
                         ("la", fit_logit_adjusted(train, validation, config, taus)),
                         ("mild", fit_mild(train, validation, config, scales))):
        report = deferral_report(fitted.choose(test.features), costs_of(test), test.errors)
        out[name] = {**report, "scale": fitted.scale}
    return out


ARMS = ("ce", "la", "mild")
BUDGET_GRID = (50, 100, 150, 200, 300, 400, 600, 800, 1200)
BUDGET_TOLERANCE = 0.01  # relative: "within 1% of the arm's best validation loss over the grid"


def validation_curve(
    train: DeferralData,
    validation: DeferralData,
    config: RejectorConfig,
    grid: Sequence[int] = BUDGET_GRID,
    scales: Sequence[float] = DEFAULT_SCALES,
    taus: Sequence[float] = DEFAULT_TAUS,
) -> dict[str, list[float]]:
    """Per arm, the validation expert-balanced deferral loss of what the arm keeps after each
    budget in `grid` (CE: its one rejector; LA / MILD: the candidate their validation search picks).
    One run per arm to the largest budget, read at each (exactly the shorter fits)."""
    val_costs = costs_of(validation)
    runs = {
        "ce": fit_rejector_snapshots(train, config, None, None, grid),
        "la": fit_rejector_snapshots(train, config, None, tau_adjustments(train, taus), grid),
        "mild": fit_rejector_snapshots(train, config, mild_margins(train, scales, config.gamma), None, grid),
    }
    curve: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for steps in grid:
        kept = {
            "ce": runs["ce"][steps][0],
            "la": fit_logit_adjusted(train, validation, config, taus, modules=runs["la"][steps]).module,
            "mild": fit_mild(train, validation, config, scales, modules=runs["mild"][steps]).module,
        }
        for arm in ARMS:
            curve[arm].append(balanced_deferral_loss(kept[arm].choose(validation.features), val_costs))
    return curve


def choose_budget(curves: list[dict[str, list[float]]], grid: Sequence[int] = BUDGET_GRID) -> dict:
    """The one budget rule, the same for every arm: per arm, the mean validation curve over the given
    runs (validation seeds and settings), and the smallest budget within `BUDGET_TOLERANCE` of that
    arm's best; the budget every arm then gets is the largest of those (no arm is cut short)."""
    per_arm = {}
    for arm in ARMS:
        mean = np.mean([c[arm] for c in curves], axis=0)
        enough = mean <= mean.min() * (1 + BUDGET_TOLERANCE)
        per_arm[arm] = {"mean_curve": mean.tolist(), "enough": int(grid[int(np.argmax(enough))])}
    return {"grid": list(grid), "tolerance": BUDGET_TOLERANCE, "per_arm": per_arm,
            "budget": max(v["enough"] for v in per_arm.values())}


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


def print_arms(table: dict) -> None:
    """The reproduction tests' per-seed table: every arm's balanced AND natural-distribution deferral
    loss, the minority recall, and the scale / tau each validation search chose."""
    print("\nimbalance seed | balanced CE / LA / MILD | natural CE / LA / MILD "
          "| minority recall CE / LA / MILD | LA tau, MILD scale")
    for (imb, seed), r in table.items():
        keys = ("balanced", "natural", "minority_recall")
        cells = [" / ".join(f"{r[arm][key]:.3f}" for arm in ARMS) for key in keys]
        print(f"{imb:>5}:1 {seed} | " + " | ".join(cells) + f" | {r['la']['scale']}, {r['mild']['scale']}")
    for imb in sorted({imb for imb, _ in table}):
        runs = [r for (i, _), r in table.items() if i == imb]
        worse = sum(r["mild"]["natural"] > r["ce"]["natural"] for r in runs)
        mean = np.mean([r["mild"]["natural"] - r["ce"]["natural"] for r in runs])
        print(f"{imb}:1 natural-distribution deferral loss: MILD worse than plain CE on {worse}/{len(runs)} "
              f"seeds (mean MILD - CE {mean:+.4f})")
