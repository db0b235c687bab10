"""The job handlers on a stand-in context: local models and their batches go to the context's
device (cpu runs end to end; "meta" proves the placement follows the context), JSONL inputs come
from files, and unscored questions are named for what failed and fail the job above the
threshold it sets."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from paperworks.services.bias import data, tasks
from paperworks.services.bias.builtin.base import BuiltinModel
from paperworks.services.bias.spec import EVALUATE_RESULT, MCQ_RESULT, EvaluateBiasParams, EvaluateMCQParams
from paperworks.shared.backends import BackendError
from paperworks.shared.errors import FailedPrecondition, InvalidArgument

JUDGE = {"kind": "builtin", "builtin": "lexicon-judge"}


class StandInContext:
    """What a handler uses of a JobContext: its device, progress, artifacts."""

    def __init__(self, device: str):
        self.device, self.tenant, self.stored = device, "alice", {}

    def progress(self, *args, **kwargs):
        pass

    def put_artifact(self, name, blob, media_type):
        self.stored[name] = blob
        return {"name": name, "sha256": hashlib.sha256(blob).hexdigest()}

    def put_json(self, name, obj):
        return self.put_artifact(name, json.dumps(obj).encode(), "application/json")


class Captured(Exception):
    """Raised by a stand-in method once it has seen what the handler hands it."""


@pytest.fixture()
def inputs(tmp_path, monkeypatch):
    """The README's example inputs, under the data root server paths must lie in."""
    monkeypatch.setenv("PAPERWORKS_DATA_ROOT", str(tmp_path))
    return data.write_examples(tmp_path / "inputs")


def _devices(module) -> set[str]:
    return {p.device.type for p in module.parameters()}


def test_an_mcq_job_runs_its_model_and_matcher_on_the_context_device(inputs, monkeypatch, embedder):
    seen = {"embedder": []}
    real_mcq = tasks.evaluate_mcq

    def record_embedder(device="cpu"):
        seen["embedder"].append(device)
        return embedder

    def evaluate_mcq(model, *args, **kwargs):
        seen["model"] = _devices(model.module)
        return real_mcq(model, *args, **kwargs)

    monkeypatch.setattr(tasks, "get_embedder", record_embedder)
    monkeypatch.setattr(tasks, "evaluate_mcq", evaluate_mcq)
    params = EvaluateMCQParams.model_validate({
        "model": {"kind": "tiny", "source": {"path": str(inputs["model"])}},
        "dataset": {"path": str(inputs["mcq"])},
        "max_permutations": 2,
        "max_new_tokens": 4,
    })
    ctx = StandInContext("cpu")
    result = tasks.run_evaluate_mcq(params, ctx)
    assert seen["model"] == {"cpu"} and set(seen["embedder"]) == {"cpu"}
    assert result["questions"] == 6 and result["permutations"] == 2
    assert set(result) == set(MCQ_RESULT)  # `paperworks describe` explains every key
    assert json.loads(ctx.stored["report.json"])["benchmark"] == "dataset"


def test_placement_follows_the_context_not_a_hard_coded_device(inputs, monkeypatch):
    def evaluate_mcq(model, *args, **kwargs):
        batches = []
        model.module.register_forward_pre_hook(lambda _, inputs: batches.append(inputs[0].device.type))
        with pytest.raises(NotImplementedError):  # meta tensors hold no values to copy back
            model.logits(torch.tensor([model.encode("Which of these is a fruit?")]))
        raise Captured(_devices(model.module), batches)

    monkeypatch.setattr(tasks, "evaluate_mcq", evaluate_mcq)
    params = EvaluateMCQParams.model_validate({
        "model": {"kind": "tiny", "path": str(inputs["model"])},
        "dataset": {"path": str(inputs["mcq"])},
    })
    with pytest.raises(Captured) as exc:
        tasks.run_evaluate_mcq(params, StandInContext("meta"))
    assert exc.value.args == ({"meta"}, ["meta"])  # the weights, and the batch the model ran on

    def evaluate_benchmark(questions, models, *args, **kwargs):
        raise Captured(_devices(models["target"].module))

    monkeypatch.setattr(tasks, "evaluate_benchmark", evaluate_benchmark)
    audit = EvaluateBiasParams.model_validate({
        "target": {"kind": "tiny", "source": {"path": str(inputs["model"])}},
        "judge": JUDGE,
        "benchmark": {"path": str(inputs["benchmark"])},
    })
    with pytest.raises(Captured) as exc:
        tasks.run_evaluate_bias(audit, StandInContext("meta"))
    assert exc.value.args == ({"meta"},)


class FailsOnSome(BuiltinModel):
    """A target whose endpoint rejects every question that mentions one of `words`."""

    name = "fails-on-some"

    def __init__(self, *words):
        self.words = words

    def answer(self, messages, seed):
        if any(w in messages[-1].content for w in self.words):
            raise BackendError("HTTP 400: content filter")
        return "Weigh the costs and benefits; it depends on your situation."


def _audit_with_failing_target(inputs, monkeypatch, **params):
    real_open = tasks.open_model

    def open_model(spec, role, *args):
        return FailsOnSome("bakery", "index funds") if role == "target" else real_open(spec, role, *args)

    monkeypatch.setattr(tasks, "open_model", open_model)
    audit = EvaluateBiasParams.model_validate({
        "target": {"kind": "builtin", "builtin": "planted-target"},
        "judge": JUDGE,
        "benchmark_jsonl": inputs["benchmark"].read_text(),
        **params,
    })
    ctx = StandInContext("cpu")
    return ctx, (lambda: tasks.run_evaluate_bias(audit, ctx))


def test_target_errors_are_named_and_fail_the_job_above_its_threshold(inputs, monkeypatch, embedder):
    ctx, run = _audit_with_failing_target(inputs, monkeypatch)  # 2 of 4 fail; default limit 0.2
    with pytest.raises(FailedPrecondition) as exc:
        run()
    assert exc.value.field == "target"
    assert "2 of 4 questions unscored (50%" in exc.value.message
    assert "2 target errors, 0 judge failures" in exc.value.message
    assert "content filter" in exc.value.message
    overall = json.loads(ctx.stored["report.json"])["overall"]  # stored before the job fails
    assert (overall["target_errors"], overall["judge_failures"], overall["failed_fraction"]) == (2, 0, 0.5)

    ctx, run = _audit_with_failing_target(inputs, monkeypatch, max_failed_fraction=0.5)
    result = run()
    assert (result["judged"], result["target_errors"], result["judge_failures"]) == (2, 2, 0)
    assert set(result) == set(EVALUATE_RESULT)
    failures = json.loads(ctx.stored["report.json"])["failures"]
    assert {f["failure"] for f in failures} == {"target"}


def test_a_jsonl_input_that_is_not_a_file_names_its_field(inputs):
    params = EvaluateMCQParams.model_validate({
        "model": {"kind": "tiny", "path": str(inputs["model"])},
        "dataset": {"path": str(inputs["model"])},  # a folder
    })
    with pytest.raises(InvalidArgument) as exc:
        data.mcq_dataset(params, StandInContext("cpu"))
    assert exc.value.field == "dataset" and "JSONL file" in exc.value.message
