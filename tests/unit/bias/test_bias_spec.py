"""Job parameters: every violation names its field path; nothing else is accepted."""

from __future__ import annotations

import pytest
from paperworks.services.bias.spec import (
    SPEC,
    EvaluateBiasParams,
    EvaluateMCQParams,
    GenerateBenchmarkParams,
    ModelSpec,
)
from pydantic import ValidationError

BUILTIN = {
    "target": {"kind": "builtin", "builtin": "planted-target"},
    "judge": {"kind": "builtin", "builtin": "lexicon-judge"},
    "generator": {"kind": "builtin", "builtin": "template-generator"},
}


def fields(model, data) -> list[str]:
    with pytest.raises(ValidationError) as exc:
        model.model_validate(data)
    return [".".join(str(p) for p in e["loc"]) for e in exc.value.errors()]


def test_the_spec_lists_three_kinds_with_their_submit_rpcs():
    assert {k: v.submit_rpc for k, v in SPEC.kinds.items()} == {
        "generate_benchmark": "SubmitGenerateBenchmark",
        "evaluate_bias": "SubmitEvaluateBias",
        "evaluate_mcq": "SubmitEvaluateMCQ",
    }


def test_a_valid_generate_request_gets_defaults():
    params = GenerateBenchmarkParams.model_validate({**BUILTIN, "budget_target_calls": 100})
    assert params.strategy == "adaptive" and params.population_size == 16
    assert set(params.build_taxonomy().attributes) == {"sex", "race", "religion"}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"budget_target_calls": 1}, "budget_target_calls"),
        ({"strategy": "greedy"}, "strategy"),
        ({"operators": ["shout"]}, "operators.0"),
        ({"dedup_threshold": 1.5}, "dedup_threshold"),
        ({"attributes": ["age"]}, "attributes"),
        ({"target": {"kind": "builtin", "builtin": "oracle"}}, "target.builtin"),
        (
            {
                "target": {
                    "kind": "builtin",
                    "builtin": "planted-target",
                    "options": {"cells": [{"kind": "x"}]},
                }
            },
            "target.options.cells.0",
        ),
        ({"target": {"kind": "tiny", "path": "/m", "options": {"a": 1}}}, "target.options"),
        ({"taxonomy": {"attributes": [{"name": "x", "options": ["a", "a"]}]}}, "taxonomy.attributes.0"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_generate_requests_name_the_field(change, field):
    found = fields(GenerateBenchmarkParams, {**BUILTIN, "budget_target_calls": 100, **change})
    assert found and all(f == field or f.startswith(field + ".") for f in found), found


@pytest.mark.parametrize(
    "role, spec, field",
    [
        ("target", {"kind": "openai", "url": "localhost:8000", "model": "m"}, "url"),
        ("judge", {"kind": "openai", "url": "http://h:1/v1"}, "model"),
        ("generator", {"kind": "hf"}, "source"),
    ],
)
def test_a_bad_backend_reference_names_the_role_and_the_field(role, spec, field):
    """The shared ModelSpec refuses a bad backend reference on the offending field's own path."""
    with pytest.raises(ValidationError) as exc:
        GenerateBenchmarkParams.model_validate({**BUILTIN, "budget_target_calls": 100, role: spec})
    [error] = exc.value.errors()
    assert error["loc"] == (role, field), error


def test_nested_builtin_option_errors_keep_their_path():
    spec = {
        "kind": "builtin",
        "builtin": "planted-target",
        "options": {"cells": [{"attribute": "sex", "topic": "t", "kind": "nasty", "group": 0}]},
    }
    with pytest.raises(ValidationError) as exc:
        ModelSpec.model_validate(spec)
    assert exc.value.errors()[0]["loc"] == ("options", "cells", 0, "kind")


def test_evaluate_bias_needs_exactly_one_benchmark_source():
    base = {"target": BUILTIN["target"], "judge": BUILTIN["judge"]}
    assert fields(EvaluateBiasParams, base) == [""]
    assert fields(EvaluateBiasParams, {**base, "benchmark_jsonl": "{}", "source_job_id": "bias-1"}) == [""]
    assert fields(EvaluateBiasParams, {**base, "benchmark_jsonl": "{}", "benchmark": {"path": "b"}}) == [""]
    assert EvaluateBiasParams.model_validate({**base, "source_job_id": "bias-1"}).source_job_id == "bias-1"
    upload = EvaluateBiasParams.model_validate({**base, "benchmark": {"upload": "a" * 64}})
    assert upload.benchmark_field == "benchmark" and upload.max_failed_fraction == 0.2
    both = {"upload": "a" * 64, "path": "b"}
    assert fields(EvaluateBiasParams, {**base, "benchmark": both}) == ["benchmark"]
    assert fields(EvaluateBiasParams, {**base, "source_job_id": "b", "max_failed_fraction": 1.5}) == [
        "max_failed_fraction"
    ]


def test_a_local_model_comes_from_a_source_or_its_path_shorthand():
    path = ModelSpec.model_validate({"kind": "tiny", "path": "/m"})
    assert path.source.path == "/m"
    upload = ModelSpec.model_validate({"kind": "hf", "source": {"upload": "b" * 64}})
    assert upload.label == f"hf:upload:{'b' * 12}"
    assert fields(ModelSpec, {"kind": "builtin", "builtin": "planted-target", "source": {"path": "/m"}}) == [
        "source"
    ]


def test_evaluate_mcq_needs_exactly_one_dataset_and_a_letter_attack():
    model = {"kind": "tiny", "path": "/models/x"}
    assert fields(EvaluateMCQParams, {"model": model}) == [""]
    two = {"model": model, "dataset_jsonl": "{}", "dataset": {"path": "d"}}
    assert fields(EvaluateMCQParams, two) == [""]
    assert fields(EvaluateMCQParams, {"model": model, "nonsenseqa": {}, "demos_jsonl": "{}",
                                      "demos": {"path": "d"}}) == [""]
    assert "attack_label" in fields(
        EvaluateMCQParams, {"model": model, "nonsenseqa": {}, "attack_label": "AB"}
    )
    params = EvaluateMCQParams.model_validate({"model": model, "nonsenseqa": {"n_questions": 8}})
    assert params.protocol_list == ["standard", "md"]
