"""The pipeline engine's pure logic: parsing, refusals naming the field, run order, readiness,
references found, filled in and stood in for at validation."""
from __future__ import annotations

import pytest
from paperworks.services.pipeline.dag import DagError, Outputs, parse, placeholders, resolve
from paperworks.services.pipeline.dag.refs import RefError, find_refs


def step(name, service="ops", kind="digest", params=None, after=(), retries=0):
    return {"name": name, "service": service, "kind": kind, "params": params or {},
            "after": list(after), "retries": retries}


CHAIN = [
    step("denoise", "segmenter", "denoise", {"model_job_id": "segmenter-x"}),
    step("segment", "segmenter", "segment",
         {"model_job_id": {"from": "train", "model": True},
          "image": {"from": "denoise", "artifact": "case_denoised.nii.gz"}}),
    step("train", "segmenter", "train_segmenter", {"minor_job_id": "segmenter-m"}),
    step("report", params={"seed": {"from": "segment", "result": "scores.0.dice"}}, after=["train"]),
]


def test_order_follows_references_and_after_lists():
    dag = parse(CHAIN)
    order = dag.order()
    assert order.index("denoise") < order.index("segment") and order.index("train") < order.index("segment")
    assert order[-1] == "report"
    assert dag.by_name["segment"].needs == ["train", "denoise"]
    assert dag.depth() == {"denoise": 0, "train": 0, "segment": 1, "report": 2}


def test_ready_steps_wait_for_every_dependency_to_succeed():
    dag = parse(CHAIN)
    assert [s.name for s in dag.ready({})] == ["denoise", "train"]
    assert [s.name for s in dag.ready({"denoise": "SUCCEEDED", "train": "RUNNING"})] == []
    assert [s.name for s in dag.ready({"denoise": "SUCCEEDED", "train": "SUCCEEDED"})] == ["segment"]
    assert dag.ready({"denoise": "SUCCEEDED", "train": "FAILED"}) == []


@pytest.mark.parametrize("steps, field, words", [
    ([step("a"), step("a")], "steps[1].name", "already the name of steps[0]"),
    ([step("a", params={"x": {"from": "b", "artifact": "y"}})], "steps[0].params.x.from",
     "no step is called 'b'"),
    ([step("a", after=["zz"])], "steps[0].after[0]", "no step is called 'zz'"),
    ([step("a", params={"x": {"from": "a", "job_id": True}})], "steps[0].params.x.from", "its own outputs"),
    ([step("a", params={"m": [1, {"from": "b", "model": False}]}), step("b")], "steps[0].params.m.1",
     "`model: true` is the only form"),
    ([step("a", params={"m": {"from": "b", "artifact": "x", "result": "y"}}), step("b")], "steps[0].params.m",
     "exactly one of"),
])
def test_bad_pipelines_are_refused_naming_the_field(steps, field, words):
    with pytest.raises(DagError) as exc:
        parse(steps)
    assert exc.value.field == field and words in exc.value.message


def test_a_cycle_is_refused_and_spelled_out():
    steps = [step("a", params={"x": {"from": "c", "job_id": True}}), step("b", after=["a"]),
             step("c", params={"y": {"from": "b", "result": "digest"}}), step("d")]
    with pytest.raises(DagError) as exc:
        parse(steps)
    assert "cycle" in exc.value.message
    assert all(n in exc.value.message for n in "abc") and "d" not in exc.value.message.split(":")[1]


def test_references_are_found_with_their_field_paths():
    refs = find_refs(CHAIN[1]["params"])
    assert [(r.path, r.step, r.output, r.name) for r in refs] == [
        ("model_job_id", "train", "model", ""), ("image", "denoise", "artifact", "case_denoised.nii.gz")]


def test_resolution_fills_each_kind_of_reference():
    outputs = {
        "train": Outputs("segmenter-t", "segmenter", models=["model.safetensors"]),
        "denoise": Outputs("segmenter-d", "segmenter", artifacts={"case_denoised.nii.gz": "ab" * 32}),
        "segment": Outputs("segmenter-s", "segmenter", result={"scores": [{"dice": 0.9}]}),
    }
    artifact = lambda ref, out: {"artifact": {"job_id": out.job_id, "name": ref.name}}  # noqa: E731
    assert resolve(CHAIN[1]["params"], outputs, artifact) == {
        "model_job_id": "segmenter-t",
        "image": {"artifact": {"job_id": "segmenter-d", "name": "case_denoised.nii.gz"}}}
    assert resolve(CHAIN[3]["params"], outputs, artifact) == {"seed": 0.9}


@pytest.mark.parametrize("outputs, words", [
    ({"train": Outputs("segmenter-t", "segmenter"), "denoise": Outputs("d", "segmenter")},
     "announced no model"),
    ({"train": Outputs("t", "segmenter", models=["m"]),
      "denoise": Outputs("d", "segmenter", artifacts={"o": "1"})},
     "has no artifact 'case_denoised.nii.gz' (it has: o)"),
])
def test_missing_outputs_fail_naming_the_field(outputs, words):
    with pytest.raises(RefError) as exc:
        resolve(CHAIN[1]["params"], outputs, lambda ref, out: {})
    assert words in exc.value.message


def test_a_missing_result_field_is_named():
    with pytest.raises(RefError) as exc:
        resolve(CHAIN[3]["params"], {"segment": Outputs("s", "segmenter", result={"scores": []})}, None)
    assert exc.value.path == "seed" and "stopped at '0'" in exc.value.message


def test_placeholders_have_the_shape_of_what_they_stand_for():
    filled, deferred, unknown = placeholders(
        {**CHAIN[1]["params"], "n": {"from": "x", "result": "k"}, "keep": [1, 2]},
        {"train": "segmenter", "denoise": "segmenter", "x": "ops"})
    assert filled["model_job_id"].startswith("segmenter-")
    assert filled["image"]["artifact"]["name"] == "case_denoised.nii.gz"
    assert "n" not in filled and filled["keep"] == [1, 2]
    # the producer's job id, like its artifact, exists only once that step ran: its service's
    # checks of the job it names wait for the step's submit
    assert deferred == {"image", "model_job_id"} and unknown == {"n"}
