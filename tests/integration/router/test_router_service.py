"""The router over real gRPC on the embedded stack: train both policies as jobs, route with them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import grpc
import numpy as np
import pytest
from paperworks.router.v1 import router_pb2
from paperworks.services.router.checkpoint import load_policy
from paperworks.services.router.data.examples import write_examples
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.rpc.tensors import from_numpy
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from support import TOKENS, announced_models


@pytest.fixture(scope="module")
def rejector_job(client):
    job = client.submit(
        "router",
        "train_rejector",
        synthetic={"imbalance": 30, "dim": 6},
        loss="LOSS_MILD",
        n_train=500,
        n_validation=300,
        n_test=400,
        steps=60,
        margin_scales=[0.0, 2.0],
    )
    return client.wait(job.id, timeout=900)


@pytest.fixture(scope="module")
def decider_job(client, remote):
    job = client.submit(
        "router",
        "train_decider",
        local={"train_tiny": {"steps": 40}},
        remotes=[
            {
                "name": "remote-real",
                "price": 1.0,
                "model": {"kind": "openai", "url": remote.url, "model": "remote-model", "timeout_s": 10},
            },
            {"name": "remote-sim", "price": 1000.0, "accuracy": [0.97, 0.97, 0.97]},
        ],
        n_train=90,
        n_validation=45,
        n_test=90,
        steps=300,
        query_router_baseline=False,
    )
    return client.wait(job.id, timeout=900)


def route(client, **fields):
    return client.stub("router").Route(
        router_pb2.RouteRequest(**fields), metadata=client.metadata, timeout=60
    )


def test_rejector_job_succeeds_with_policy_report_and_plot(client, rejector_job, tmp_path):
    assert PROTO_TO_STATE[rejector_job.state] == "SUCCEEDED", rejector_job.error.message
    result = rejector_job.result
    assert result["kind"] == "rejector" and result["policy_loss"] == "mild"
    assert set(result["baseline"]) == {"two_stage_ce", "logit_adjusted_ce"}
    assert all("test_deferral_loss" in b for b in result["baseline"].values())
    names = {a.name for a in rejector_job.artifacts}
    assert names == {"policy.safetensors", "report.json", "curves.png"}
    assert announced_models(client, rejector_job) == ["policy.safetensors"]
    paths = {p.name: p for p in client.pull_artifacts(rejector_job.id, tmp_path)}
    report = json.loads(paths["report.json"].read_text())
    assert report["runs"]["mild"]["test"]["balanced_deferral_loss"] == pytest.approx(
        result["test_balanced_deferral_loss"]
    )
    assert len(report["runs"]["mild"]["selection"]) == 2
    assert paths["curves.png"].read_bytes().startswith(b"\x89PNG")


def test_route_with_a_rejector_policy(client, rejector_job):
    reply = route(client, policy_job_id=rejector_job.id, features=from_numpy(np.zeros(6, np.float32)))
    assert reply.policy_kind == "rejector" and reply.policy_sha256 == rejector_job.result["policy_sha256"]
    assert [s.name for s in reply.scores] == ["base", "expert1", "expert2", "expert3"]
    assert reply.agent == reply.scores[reply.agent_index].name
    assert reply.agent_index == int(np.argmax([s.score for s in reply.scores]))


def test_decider_job_scores_the_real_remote_and_routes_text(client, decider_job, remote, tmp_path):
    assert PROTO_TO_STATE[decider_job.state] == "SUCCEEDED", decider_job.error.message
    assert set(decider_job.result["areas"]) == {"sdr", "always_local", "always_best", "confidence_cascade"}
    paths = {p.name: p for p in client.pull_artifacts(decider_job.id, tmp_path)}
    report = json.loads(paths["report.json"].read_text())
    assert report["train_quality_by_family"]["remote-real"] == [1.0, 1.0, 0.0]
    local = route(client, policy_job_id=decider_job.id, text="2+3=", cost_lambda=1e6)
    assert local.accepted_local and local.agent == "local" and local.answer == local.local_answer
    assert [s.name for s in local.scores] == ["local", "remote-real", "remote-sim"]
    budgeted = route(client, policy_job_id=decider_job.id, text="up:ab=", budget=100.0, execute=False)
    assert budgeted.policy_kind == "sdr" and budgeted.cost_lambda >= 0


def test_route_executes_the_chosen_remote_and_surfaces_its_errors(client, decider_job, remote):
    # A tiny price weight: the real remote (always right on additions, price 1) beats the simulated
    # one (price 1000) and the barely trained local model.
    asked = len(remote.prompts)
    reply = route(client, policy_job_id=decider_job.id, text="4+4=", cost_lambda=1e-4, execute=True)
    assert reply.agent == "remote-real" and not reply.accepted_local
    assert reply.executed and reply.answer == "8" and len(remote.prompts) == asked + 1
    # over chat (the model reference's default api), the whole answer asked for, no first-line cut
    assert remote.routes[-1] == "/v1/chat/completions" and reply.finish_reason == "stop"
    assert remote.payloads[-1]["max_tokens"] == 256 and "stop" not in remote.payloads[-1]
    cut = route(client, policy_job_id=decider_job.id, text="4+4=", cost_lambda=1e-4, execute=True,
                max_answer_tokens=12, first_line_only=True)
    assert cut.answer == "8" and remote.payloads[-1]["max_tokens"] == 12
    assert remote.payloads[-1]["stop"] == ["\n"]
    remote.fail_next(429, "rate limited by the scripted remote", times=3)
    with pytest.raises(grpc.RpcError) as exc:
        route(client, policy_job_id=decider_job.id, text="4+4=", cost_lambda=1e-4, execute=True, timeout_s=5)
    assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "rate limited by the scripted remote" in exc.value.details()
    # Lookups: the real remote is always wrong, so with price ignored the simulated one is chosen,
    # and a simulated remote cannot be called.
    with pytest.raises(grpc.RpcError) as exc:
        route(client, policy_job_id=decider_job.id, text="get:abc=", cost_lambda=0.0, execute=True)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "remote-sim" in exc.value.details()


def test_bad_requests_are_invalid_arguments_naming_the_field(client, stack, rejector_job, decider_job):
    cases = [
        (
            lambda: client.submit("router", "train_rejector", synthetic={"imbalance": 0.5}, loss="LOSS_MILD"),
            "synthetic.imbalance",
        ),
        (
            lambda: client.submit(
                "router",
                "train_decider",
                local={"train_tiny": {}},
                remotes=[{"name": "r", "price": -1, "accuracy": [1, 1, 1]}],
            ),
            "remotes.0.price",
        ),
        (
            lambda: route(
                client, policy_job_id=rejector_job.id, features=from_numpy(np.zeros(5, np.float32))
            ),
            "features.shape",
        ),
        (lambda: route(client, policy_job_id=decider_job.id, text="1+1=", cost_lambda=-2.0), "cost_lambda"),
        (lambda: route(client, policy_job_id="", text="1+1="), "policy_job_id"),
        (
            lambda: route(
                client, policy_job_id=decider_job.id, text="1+1=", execute=True, max_answer_tokens=0
            ),
            "max_answer_tokens",
        ),
        (
            lambda: client.submit(
                "router",
                "train_decider",
                local={"train_tiny": {}},
                prompts={"rows": [{"prompt": "2+2=", "reference": "4"}, {"prompt": "3+3="}]},
                remotes=[{"name": "r", "price": 1, "accuracy": [1]}],
            ),
            "prompts.rows.1.reference",
        ),
    ]
    for call, field in cases:
        with pytest.raises(grpc.RpcError) as exc:
            call()
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert [f for f, _ in field_violations(exc.value)] == [field]
    # a missing oneof names each field that would fill it, never the oneof's own name
    with pytest.raises(grpc.RpcError) as exc:
        client.submit("router", "train_rejector", loss="LOSS_MILD")
    assert [f for f, _ in field_violations(exc.value)] == ["synthetic", "text_families", "logged"]
    with pytest.raises(grpc.RpcError) as exc:
        route(client, policy_job_id="router-0000", text="1+1=")
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.fixture(scope="module")
def uploaded_decider(client, tmp_path_factory):
    """A TrainDecider job whose prompt set and local model folder a client in a working directory of
    its own uploaded (the folder as a .tar.gz), as it would from another machine."""
    home = tmp_path_factory.mktemp("client-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(home)
        inputs = write_examples(Path("inputs"), rows=40, steps=30)
        prompts, model = (client.upload(Path(p)).artifact.sha256 for p in inputs[:2])
        job = client.submit(
            "router", "train_decider",
            local={"model": {"kind": "tiny", "source": {"upload": model}}},
            prompts={"source": {"upload": prompts}, "scorer": "exact"},
            remotes=[{"name": "big", "price": 1.0, "accuracy": [0.95]}],
            steps=50, max_new_tokens=4, query_router_baseline=False,
        )
        return home, prompts, model, client.wait(job.id, timeout=900)


def test_a_job_reads_uploads_from_another_directory_and_its_outputs_come_back_whole(
    client, uploaded_decider, tmp_path
):
    home, prompts, model, job = uploaded_decider
    assert PROTO_TO_STATE[job.state] == "SUCCEEDED", job.error.message
    attached = {a.name: a.sha256 for a in job.artifacts}
    pulled = {p.name: p for p in client.pull_artifacts(job.id, tmp_path)}
    assert set(pulled) == set(attached) == {"policy.safetensors", "report.json", "curves.png"}
    for name, path in pulled.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == attached[name], name
    report = json.loads(pulled["report.json"].read_text())
    assert report["task_source"] == "prompts" and sum(report["sizes"].values()) == 40
    policy = load_policy(pulled["policy.safetensors"].read_bytes())
    assert policy.meta["local"]["model"]["source"]["upload"] == model
    # Route reopens the uploaded folder: its local answer is the model's own greedy answer
    prompt = json.loads((home / "inputs" / "prompts.jsonl").read_text().splitlines()[0])["prompt"]
    own = TinyBackend.from_dir(home / "inputs" / "tiny-lm").generate([prompt], max_new_tokens=4)[0].text
    reply = route(client, policy_job_id=job.id, text=prompt, cost_lambda=1e6)
    assert reply.accepted_local and reply.local_answer == own == reply.answer


def test_references_to_other_jobs_and_uploads_are_checked_at_submit(client, stack, uploaded_decider,
                                                                     rejector_job):
    """Kind, state and tenant of every job a request names, before anything is written."""
    _, prompts, _, _ = uploaded_decider
    store = JobStore(Database(stack.database_url))
    evaluation, _ = store.submit("alice", "quantizer", "evaluate", {})  # a quantizer job of another kind
    run = store.acquire(evaluation.id, lease_s=30, max_attempts=1)
    store.finish(evaluation.id, run.token, "SUCCEEDED", result={})
    remotes = [{"name": "r", "price": 1.0, "accuracy": [0.9]}]

    def refused(submitter, code, field, **params):
        with pytest.raises(grpc.RpcError) as exc:
            submitter.submit("router", "train_decider", remotes=remotes, **params)
        assert exc.value.code() == code and exc.value.details().startswith(f"{field}: "), exc.value.details()
        return exc.value.details()

    local = {"train_tiny": {}}
    prompt_set = {"source": {"upload": prompts}}
    not_found, failed = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION
    assert "announced no model" in refused(client, failed, "local.quantize_job_id",
                                           local={"quantize_job_id": evaluation.id}, prompts=prompt_set)
    assert "no quantizer job" in refused(client, not_found, "local.quantize_job_id",
                                         local={"quantize_job_id": rejector_job.id}, prompts=prompt_set)
    assert "no artifact prompts.jsonl" in refused(
        client, failed, "prompts.source.artifact.name", local=local,
        prompts={"source": {"artifact": {"job_id": rejector_job.id, "name": "prompts.jsonl"}}})
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        refused(bob, not_found, "local.quantize_job_id", local={"quantize_job_id": evaluation.id},
                prompts=prompt_set)
        refused(bob, not_found, "prompts.source.upload", local=local, prompts=prompt_set)
        refused(bob, not_found, "prompts.source.artifact.job_id", local=local,
                prompts={"source": {"artifact": {"job_id": rejector_job.id, "name": "report.json"}}})
        with pytest.raises(grpc.RpcError) as exc:
            route(bob, policy_job_id=rejector_job.id, features=from_numpy(np.zeros(6, np.float32)))
        assert exc.value.code() == not_found
