"""The moe service over real gRPC on the embedded stack: every job kind through Kafka and Celery
(upcycle, a second upcycle reading the first one's dense.safetensors as an InputRef with
Drop-Upcycling, train_moe with a mix of all four router terms, evaluate_routing,
train_skill_policy, evaluate_skills), the Route and Act RPCs, and the field-naming refusals."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from paperworks.moe.v1 import moe_pb2
from paperworks.services.moe import skillnet
from paperworks.shared.rpc.tensors import from_numpy, to_numpy
from paperworks.shared.sdk.errors import field_violations
from support import announced_models, finished, service_fixtures

stack, client = service_fixtures("moe")
SMALL = {"d_model": 16, "heads": 2, "d_ff": 32, "dense_steps": 30, "batch_size": 32}


@pytest.fixture(scope="module")
def upcycled(client):
    return finished(client, client.submit("moe", "upcycle", world={"seed": 2}, **SMALL))


@pytest.fixture(scope="module")
def trained(client, upcycled):
    terms = [
        {"type": "dpsl", "per_modality": [{"alpha": [2, 2, 0.05, 0.05]}, {"alpha": [0.05, 0.05, 2, 2]}]},
        {"type": "load_balance", "weight": 0.01},
        {"type": "z_loss", "weight": 0.001},
        {"type": "aux_free_bias", "rate": 0.001},
    ]
    job = client.submit(
        "moe", "train_moe", model_job_id=upcycled.id, router_losses=terms, steps=12, eval_sequences=100
    )
    return finished(client, job)


@pytest.fixture(scope="module")
def policy(client):
    job = client.submit("moe", "train_skill_policy", demos_per_task=1, steps=3, batch_size=16)
    return finished(client, job)


def test_upcycle_announces_the_moe(client, upcycled):
    r = upcycled.result
    assert r["experts"] == 4 and r["top_k"] == 2
    assert r["upcycled_accuracy"] == pytest.approx(r["dense_accuracy"], abs=0.01)
    assert {a.name for a in upcycled.artifacts} == {"dense.safetensors", "model.safetensors"}
    assert announced_models(client, upcycled) == ["model.safetensors"]


def test_drop_upcycle_of_a_given_dense_model(client, upcycled):
    ref = {"artifact": {"job_id": upcycled.id, "name": "dense.safetensors"}}
    job = client.submit("moe", "upcycle", dense=ref, init="drop_upcycle", drop_ratio=0.5, experts=3, top_k=1)
    done = finished(client, job)
    assert done.result["experts"] == 3 and done.result["dense_accuracy"] == upcycled.result["dense_accuracy"]


def test_train_moe_reports_routing_per_expert(client, trained):
    r = trained.result
    assert 0.25 <= r["confidence"] <= 1.0 and r["max_mean_load"] >= 1.0 and r["modality_entropy"] > 0.9
    assert len(r["layers"]) == 2 and len(r["layers"][0]["cvm"]) == 4 and len(r["layers"][0]["load"]) == 4
    assert {a.name for a in trained.artifacts} == {"history.json", "routing.json", "model.safetensors"}
    assert announced_models(client, trained) == ["model.safetensors"]


def test_evaluate_routing_and_route(client, trained):
    job = client.submit("moe", "evaluate_routing", model_job_id=trained.id, sequences=50, alpha=[0.5])
    done = finished(client, job)
    assert done.result["sequences"] == 50 and 0.0 <= done.result["mutual_information"] <= 1.0
    assert {a.name for a in done.artifacts} == {"routing.json", "routing_histograms.png"}
    x = np.random.default_rng(0).normal(size=(3, 8, 16)).astype(np.float32)
    reply = _route(client, trained.id, x)
    probs, selected = to_numpy(reply.probabilities), to_numpy(reply.selected)
    assert probs.shape == (2, 3, 8, 4) and selected.shape == (2, 3, 8, 2)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)


def test_skill_policy_evaluate_and_act(client, policy):
    assert policy.result["arm"] == "skillnet" and announced_models(client, policy) == ["policy.safetensors"]
    job = client.submit("moe", "evaluate_skills", model_job_id=policy.id, episodes_per_task=1, max_steps=10)
    done = finished(client, job)
    assert 0.0 <= done.result["success"] <= 1.0 and len(done.result["per_task"]) == len(
        skillnet.valid_tasks()
    )
    assert {a.name for a in done.artifacts} == {"skills.json", "rollout.png"}
    obs = np.zeros(skillnet.OBS_DIM, np.float32)
    request = moe_pb2.ActRequest(
        model_job_id=policy.id, observation=from_numpy(obs), instruction="open drawer, then place block"
    )
    actions = to_numpy(client.stub("moe").Act(request, metadata=client.metadata, timeout=60).actions)
    assert actions.ndim == 2 and actions.shape[1] == 4 and np.abs(actions).max() <= 1.0


def _route(client, job_id, x):
    request = moe_pb2.RouteRequest(model_job_id=job_id, inputs=from_numpy(x))
    return client.stub("moe").Route(request, metadata=client.metadata, timeout=60)


def _refused(call) -> list[tuple[str, str]]:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    return field_violations(exc.value)


def test_wrong_references_and_inputs_are_refused(client, upcycled, policy):
    fields = _refused(lambda: client.submit("moe", "train_moe", model_job_id=policy.id))
    assert fields[0][0] == "model_job_id" and "train_skill_policy" in fields[0][1]
    fields = _refused(lambda: client.submit("moe", "evaluate_skills", model_job_id=upcycled.id))
    assert fields[0][0] == "model_job_id"
    fields = _refused(lambda: client.submit("moe", "upcycle", experts=2, top_k=3))
    assert "top_k" in fields[0][1]
    fields = _refused(
        lambda: client.submit("moe", "train_moe", model_job_id=upcycled.id, router_losses=[{"type": "kl"}])
    )
    assert fields[0][0].startswith("router_losses")
    fields = _refused(lambda: _route(client, upcycled.id, np.zeros((2, 8, 5), np.float32)))
    assert fields[0][0] == "inputs.shape"
    fields = _refused(lambda: _route(client, upcycled.id, np.zeros((100, 64, 16), np.float32)))
    assert fields[0][0] == "inputs.shape"
    bad = moe_pb2.ActRequest(
        model_job_id=policy.id, observation=from_numpy(np.zeros(26, np.float32)), instruction="fly away"
    )
    fields = _refused(lambda: client.stub("moe").Act(bad, metadata=client.metadata, timeout=60))
    assert fields[0][0] == "instruction"
