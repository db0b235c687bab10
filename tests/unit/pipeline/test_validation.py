"""A pipeline refused whole before anything is written: services, kinds, result references against
the producing kind's declared keys, and each step's own refusal renamed to the pipeline's field;
inputs a reference will fill are validated by shape and left unchecked."""
from __future__ import annotations

import grpc
import pytest
from paperworks.services.pipeline.dag import parse
from paperworks.services.pipeline.spec import RunParams
from paperworks.services.pipeline.validation import check_step, renamed_pydantic, structure
from paperworks.shared.errors import InvalidArgument, NotFound, violations_from_pydantic
from paperworks.shared.inputs import InputRefParams
from paperworks.shared.rpc.runtime import without_inputs
from pydantic import BaseModel, ValidationError


def run(*steps):
    return RunParams.model_validate({"steps": list(steps)})


OPS = {"name": "a", "service": "ops", "kind": "digest",
       "params": {"seed": 1, "steps": 2, "rounds_per_step": 1}}


@pytest.mark.parametrize("steps, field", [
    ([{**OPS, "service": "nope"}], "steps[0].service"),
    ([{**OPS, "service": "pipeline", "kind": "run"}], "steps[0].service"),
    ([{**OPS, "kind": "nope"}], "steps[0].kind"),
    ([OPS, {**OPS, "name": "b", "params": {"seed": {"from": "a", "result": "nope.x"}}}],
     "steps[1].params.seed.result"),
])
def test_structure_refusals_name_the_field(steps, field):
    with pytest.raises(InvalidArgument) as exc:
        structure(run(*steps))
    assert exc.value.field == field


def test_pydantic_paths_are_renamed_to_the_pipeline_form():
    with pytest.raises(ValidationError) as exc:
        RunParams.model_validate({"steps": [OPS, {**OPS, "name": "B!"}]})
    assert renamed_pydantic(violations_from_pydantic(exc.value)).field == "steps[1].name"


class Refusing:
    """A service answering ValidateJob with the given status and field violations."""

    def __init__(self, code, violations):
        self.code, self.violations, self.calls = code, violations, []

    def validate_job(self, service, kind, params, deferred):
        self.calls.append((service, kind, params, deferred))
        if self.code is None:
            return None
        error = grpc.RpcError()
        error.code = lambda: self.code
        error.details = lambda: f"{self.violations[0][0]}: {self.violations[0][1]}"
        error.trailing_metadata = lambda: ()
        raise error


def step_of(params):
    return parse([{"name": "up", "service": "ops", "kind": "digest", "params": {}},
                  {"name": "s", "service": "segmenter", "kind": "segment", "params": params}]).steps[1]


def test_a_step_refusal_is_renamed_and_keeps_its_code(monkeypatch):
    from paperworks.services.pipeline import validation

    node = step_of({"model_job_id": "segmenter-1", "threshold": 7})
    monkeypatch.setattr(validation, "field_violations", lambda exc: [("threshold", "less than 1")])
    with pytest.raises(InvalidArgument) as exc:
        check_step(Refusing(grpc.StatusCode.INVALID_ARGUMENT, [("threshold", "less than 1")]), node, {})
    assert exc.value.field == "steps[1].params.threshold"
    monkeypatch.setattr(validation, "field_violations", lambda exc: [("image.upload", "no upload")])
    with pytest.raises(NotFound) as exc:
        check_step(Refusing(grpc.StatusCode.NOT_FOUND, [("image.upload", "no upload")]), node, {})
    assert exc.value.field == "steps[1].params.image.upload"


def test_references_stand_in_by_shape_and_their_inputs_and_job_ids_are_deferred(monkeypatch):
    from paperworks.services.pipeline import validation

    node = step_of({"model_job_id": {"from": "up", "job_id": True},
                    "image": {"from": "up", "artifact": "x.nii.gz"},
                    "threshold": {"from": "up", "result": "t"}})
    service = Refusing(None, [])
    check_step(service, node, {"up": "ops"})
    [(_, _, params, deferred)] = service.calls
    assert params["model_job_id"].startswith("ops-") and params["image"]["artifact"]["name"] == "x.nii.gz"
    assert "threshold" not in params and deferred == ["image", "model_job_id"]
    # a violation only at a field a result reference fills at run time is not a refusal
    monkeypatch.setattr(validation, "field_violations", lambda exc: [("threshold", "required")])
    check_step(Refusing(grpc.StatusCode.INVALID_ARGUMENT, [("threshold", "required")]), node, {"up": "ops"})


class Inner(BaseModel):
    source: InputRefParams | None = None


class Outer(BaseModel):
    dataset: Inner
    images: list[InputRefParams] = []


def test_deferred_inputs_are_left_out_of_the_input_checks():
    ref = InputRefParams(upload="a" * 64)
    params = Outer(dataset=Inner(source=ref), images=[ref, ref])
    stripped = without_inputs(params, frozenset({"dataset.source", "images.1"}))
    assert stripped.dataset.source is None and stripped.images == [ref, None]
    assert params.dataset.source == ref  # the validated parameters themselves are untouched
