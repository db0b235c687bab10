"""The training service's parameter models refuse bad requests with the field and the reason, and
the sync Plan's analytic cost table is shaped like a profile."""

from __future__ import annotations

import pytest
from paperworks.services.training.cornstarch import costs, partition
from paperworks.services.training.cornstarch.model import MLLM, Freeze, MLLMConfig
from paperworks.services.training.spec import PlanParallelismParams, SimulateParams, TrainParams
from pydantic import ValidationError


@pytest.mark.parametrize(
    "model, params, words",
    [
        (TrainParams, {"world_size": 5}, "world_size"),
        (TrainParams, {"batch_size": 6, "microbatches": 4}, "divisible"),
        (TrainParams, {"model": {"d_model": 30, "heads": 4}}, "heads"),
        (TrainParams, {"model": {"encoders": [{"name": "llm"}]}}, "not 'llm'"),
        (
            TrainParams,
            {"model": {"encoders": [{"name": "a"}, {"name": "b"}]}, "world_size": 2},
            "several encoders",
        ),
        (PlanParallelismParams, {"cp_size": 8, "sequence": {"seq_len": 512}}, "128 * cp_size"),
        (SimulateParams, {}, "exactly one"),
        (
            SimulateParams,
            {"stages": [{"forward": 1, "backward": 1, "next": -1}, {"forward": 1, "backward": 1}]},
            "last stage",
        ),
        (SimulateParams, {"stages": [{"forward": -1, "backward": 1}]}, "forward"),
    ],
)
def test_bad_params_are_refused_with_the_reason(model, params, words):
    with pytest.raises(ValidationError) as exc:
        model.model_validate(params)
    assert words in str(exc.value)


def test_defaults_validate_and_layers_match_the_model():
    p = TrainParams()
    cfg = MLLMConfig()
    model = MLLM(cfg)
    assert p.model.layers() == {"vision": len(model.branches["vision"]), "llm": len(model.llm)}


def test_analytic_costs_are_profile_shaped_and_freezing_aware():
    cfg = MLLMConfig()
    model = MLLM(cfg).apply_freeze(Freeze.pattern("frozen_encoder", cfg.encoders))
    prof = costs.analytic(model, 2)
    assert set(prof) == {f"{m}:{i}" for m, i in model.layer_ids()}
    assert costs.backward_cost(prof["vision:1"]) == 0.0 and costs.backward_cost(prof["llm:1"]) > 0
    plans = {m: partition.partition(prof, {"vision": 6, "llm": 8}, 2, 4, m) for m in partition.METHODS}
    aware = plans["frozen_aware"]["predicted_iteration_time"]
    assert all(aware <= p["predicted_iteration_time"] for p in plans.values())
    assert partition.count_candidates({"vision": 6, "llm": 8}, 3) == len(
        list(partition.candidates({"vision": 6, "llm": 8}, 3))
    )
    mods = {"vision": 3, "audio": 2, "llm": 3}
    assert partition.count_candidates(mods, 4) == len(list(partition.candidates(mods, 4)))
