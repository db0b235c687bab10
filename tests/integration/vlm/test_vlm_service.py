"""The vlm service over real gRPC on the embedded stack: every job kind through Kafka and Celery
(pretrain, build_conflict_set, an audit reading the conflict set as another job's artifact and one
reading it as an upload, steer_preference, train_rl), the Answer RPC, and the field-naming refusals
of references to the wrong kind of job and of bad queries; SpatioLM's train_spatial (spatio arm,
announced model), evaluate_spatial (tables, AbsRel, depth PNG) and Answer serving the model with its
branch on rendered frames."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from paperworks.services.vlm.data import conflict_set_bytes
from paperworks.services.vlm.following.conflicts import build_grid
from paperworks.services.vlm.spatiolm import qa, world
from paperworks.shared.rpc.tensors import from_numpy
from paperworks.shared.sdk.errors import field_violations
from paperworks.vlm.v1 import vlm_pb2
from support import announced_models, finished, service_fixtures

stack, client = service_fixtures("vlm")
SMALL = {"d_model": 16, "heads": 2, "lm_layers": 2, "batch_size": 32}


@pytest.fixture(scope="module")
def mixed(client):
    return finished(client, client.submit("vlm", "pretrain", steps=120, **SMALL))


@pytest.fixture(scope="module")
def conflict_set(client):
    return finished(client, client.submit("vlm", "build_conflict_set", seed=3, per_cell=6))


@pytest.fixture(scope="module")
def audited(client, mixed, conflict_set):
    ref = {"artifact": {"job_id": conflict_set.id, "name": "conflict_set.npz"}}
    job = client.submit(
        "vlm", "audit_modality_following", model_job_id=mixed.id, conflict_set=ref, bootstrap=20
    )
    return finished(client, job)


def test_pretrain_announces_a_model(client, mixed):
    assert mixed.result["task"] == "modality_mix" and mixed.result["parameters"] > 0
    assert 0.0 <= mixed.result["text_only_accuracy"] <= 1.0
    assert announced_models(client, mixed) == ["model.safetensors"]


def test_audit_reports_the_law_and_its_figures(audited, conflict_set):
    assert conflict_set.result["items"] == 150 and conflict_set.result["cells"] == 25
    r = audited.result
    assert r["items"] == 150 and set(r["balance_points"]) == {"entropy", "one_minus_max"}
    assert r["ci_low"] <= r["ci_high"] and 0.0 <= r["tfr"] + r["vfr"] <= 1.0
    names = {a.name for a in audited.artifacts}
    assert names == {"audit.json", "records.npz", "following_curve.png", "layer_trajectories.png"}


def test_audit_of_an_uploaded_conflict_set(client, mixed, tmp_path):
    path = tmp_path / "conflicts.npz"
    path.write_bytes(conflict_set_bytes(build_grid(4, 4)))
    upload = client.upload(path, "vlm")
    job = client.submit(
        "vlm",
        "audit_modality_following",
        model_job_id=mixed.id,
        conflict_set={"upload": upload.artifact.sha256},
        indices=["one_minus_margin"],
        bootstrap=10,
    )
    done = finished(client, job)
    assert done.result["items"] == 100 and list(done.result["balance_points"]) == ["one_minus_margin"]


def test_steer_then_answer(client, audited):
    job = client.submit(
        "vlm", "steer_preference", audit_job_id=audited.id, cases=40, steps=5, eval_per_cell=4
    )
    steered = finished(client, job)
    assert steered.result["cases"] == 40 and 0.0 <= steered.result["target_following_after"] <= 1.0
    assert announced_models(client, steered) == ["model.safetensors"]
    image = np.zeros((16, 16, 3), np.float32)
    image[:, :] = (0.9, 0.1, 0.1)
    text = "reports : red red red red red red ; what color is the object ?"
    reply = _answer(client, steered.id, image, text)
    assert list(reply.options)[0] == "red" and len(reply.probabilities) == 6
    assert abs(sum(reply.probabilities) - 1.0) < 1e-6 and reply.answer in reply.options


def test_train_rl_with_cfpo(client):
    base = finished(client, client.submit("vlm", "pretrain", task="shortcut_vqa", steps=40, **SMALL))
    job = client.submit(
        "vlm", "train_rl", model_job_id=base.id, algorithm="cfpo", steps=4, prompts=8, eval_items=50
    )
    done = finished(client, job)
    assert done.result["algorithm"] == "cfpo-grpo" and 0.0 <= done.result["anti_prior_accuracy"] <= 1.0
    assert {a.name for a in done.artifacts} == {"history.json", "model.safetensors"}
    assert announced_models(client, done) == ["model.safetensors"]


def _answer(client, model_job_id: str, image: np.ndarray, text: str) -> vlm_pb2.AnswerResponse:
    request = vlm_pb2.AnswerRequest(model_job_id=model_job_id, image=from_numpy(image), text=text)
    return client.stub("vlm").Answer(request, metadata=client.metadata, timeout=60)


def _refused(call) -> list[tuple[str, str]]:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    return field_violations(exc.value)


def test_wrong_references_and_queries_are_refused(client, conflict_set, mixed):
    fields = _refused(
        lambda: client.submit(
            "vlm", "audit_modality_following", model_job_id=conflict_set.id, synthetic={"seed": 1}
        )
    )
    assert fields and fields[0][0] == "model_job_id" and "build_conflict_set" in fields[0][1]
    fields = _refused(lambda: client.submit("vlm", "steer_preference", audit_job_id=mixed.id))
    assert fields[0][0] == "audit_job_id"
    fields = _refused(lambda: client.submit("vlm", "audit_modality_following", model_job_id=mixed.id))
    assert "exactly one of conflict_set and synthetic" in fields[0][1]
    image = np.zeros((16, 16, 3), np.float32)
    fields = _refused(lambda: _answer(client, mixed.id, image, "what color is the zebra ?"))
    assert fields == [("text", "word 'zebra' is not in the model's vocabulary")]
    fields = _refused(lambda: _answer(client, mixed.id, np.zeros((8, 8, 3), np.float32), "what color ?"))
    assert fields[0][0] == "image.shape"


# --- SpatioLM (arXiv 2608.01899) ---
TINY = {
    "d_model": 16,
    "heads": 2,
    "pretrain_items": 48,
    "pretrain_steps": 4,
    "items": 32,
    "steps": 3,
    "batch_size": 16,
}


@pytest.fixture(scope="module")
def spatio(client):
    return finished(client, client.submit("vlm", "train_spatial", frames=2, **TINY))


def _spatial_answer(client, job_id, image, text):
    request = vlm_pb2.AnswerRequest(model_job_id=job_id, image=from_numpy(image), text=text)
    return client.stub("vlm").Answer(request, metadata=client.metadata, timeout=60)


def test_train_evaluate_and_answer_with_the_branch(client, spatio):
    r = spatio.result
    assert r["arm"] == "spatio" and 0 < r["trainable_parameters"] < r["parameters"]
    assert 0.0 <= r["spatial_accuracy"] <= 1.0 and 0.0 <= r["base_general_accuracy"] <= 1.0
    assert announced_models(client, spatio) == ["model.safetensors"]
    ev = finished(client, client.submit("vlm", "evaluate_spatial", model_job_id=spatio.id, items=10))
    assert ev.result["items"] == 10 and ev.result["depth_abs_rel"] > 0 and ev.result["teacher_abs_rel"] >= 0
    assert {a.name for a in ev.artifacts} == {"evaluation.json", "depth.png"}
    frames = world.render_all(world.random_scene(np.random.default_rng(0), 2))["image"]
    out = _spatial_answer(client, spatio.id, frames, "which closer red or blue ?")
    assert list(out.options) == list(qa.ANSWERS) and out.answer in qa.ANSWERS
    assert sum(out.probabilities) == pytest.approx(1.0, abs=1e-6)


def _spatial_refused(call):
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    return field_violations(exc.value)


def test_spatial_refusals_name_the_field(client, spatio):
    frames = np.zeros((2, 24, 24, 3), np.float32)
    assert (
        _spatial_refused(lambda: _spatial_answer(client, spatio.id, frames[:1], "how far is red ?"))[0][0]
        == "image.shape"
    )
    assert _spatial_refused(lambda: _spatial_answer(client, spatio.id, frames, "how far is mauve ?"))[0] == (
        "text",
        "word 'mauve' is not in the spatial vocabulary",
    )
    assert (
        _spatial_refused(lambda: _spatial_answer(client, spatio.id, np.zeros((16, 16, 3), np.float32), "x"))[
            0
        ][0]
        == "image.shape"
    )
    fields = _spatial_refused(lambda: client.submit("vlm", "train_spatial", d_model=18, heads=4))
    assert "heads" in fields[0][1]
    fields = _refused(
        lambda: client.submit(
            "vlm", "audit_modality_following", model_job_id=spatio.id, synthetic={"seed": 1}
        )
    )
    assert fields[0][0] == "model_job_id" and "train_spatial" in fields[0][1]
