"""Services chain through announced models: the router runs a quantizer job's 2-bit model as its
local LM (found by the job's MODEL_READY event, loaded by the quantizer's registered loader, no
import of quantizer code in the router), on one embedded stack running both services."""
from __future__ import annotations

import grpc
import pytest
from paperworks.quantizer.v1 import quantizer_pb2
from paperworks.router.v1 import router_pb2
from paperworks.services.router.checkpoint import load_policy
from paperworks.services.router.data import TaskSuite
from paperworks.services.router.sdr.local_lm import train_local_tiny
from paperworks.shared.backends.tiny_model import save_tiny
from paperworks.shared.sdk.client import Client
from support import TOKENS, finished, service_fixtures

stack, client = service_fixtures("quantizer", "router")


@pytest.fixture(scope="module")
def quantized(client, tmp_path_factory):
    """A tiny LM trained on the router's task suite, quantized to 2 bits (RaBiT init, no QAT)."""
    suite = TaskSuite()
    module = train_local_tiny(suite, steps=60, seed=0)
    directory = save_tiny(tmp_path_factory.mktemp("local") / "model", module)
    text = tmp_path_factory.mktemp("text") / "tasks.txt"
    text.write_text("\n".join(t.text for t in suite.generate(400, seed=5, known_only=True)))
    return finished(client, client.submit(
        "quantizer", "quantize", model={"kind": "tiny", "path": str(directory)}, method="rabit",
        data={"path": str(text)}, seq_len=32, calibration_windows=8))


def test_the_router_routes_with_the_model_a_quantizer_job_announced(client, quantized, tmp_path):
    decider = finished(client, client.submit(
        "router", "train_decider", local={"quantize_job_id": quantized.id},
        remotes=[{"name": "remote-sim", "price": 1.0, "accuracy": [0.97, 0.97, 0.97]}],
        n_train=60, n_validation=30, n_test=30, steps=100, query_router_baseline=False))
    assert decider.result["kind"] == "sdr"
    policy = {p.name: p for p in client.pull_artifacts(decider.id, tmp_path)}["policy.safetensors"]
    local = load_policy(policy.read_bytes()).meta["local"]["announced"]
    assert local["job_id"] == quantized.id
    assert local["artifact"]["sha256"] == quantized.result["checkpoint_sha256"]
    route = client.stub("router").Route(
        router_pb2.RouteRequest(policy_job_id=decider.id, text="2+3=", cost_lambda=1e6),
        metadata=client.metadata, timeout=60)
    assert route.accepted_local and route.agent == "local"
    # the router's local answer is what the quantizer itself serves from that checkpoint
    served = client.stub("quantizer").Generate(
        quantizer_pb2.GenerateRequest(quantize_job_id=quantized.id, prompts=["2+3="], max_new_tokens=8),
        metadata=client.metadata, timeout=60)
    assert served.completions[0].token_ids and route.local_answer == served.completions[0].text


def test_a_model_the_tenant_cannot_use_is_refused_at_submission_naming_the_field(client, stack, quantized):
    remotes = [{"name": "remote-sim", "price": 1.0, "accuracy": [0.9, 0.9, 0.9]}]

    def refused(submitter, job_id) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as exc:
            submitter.submit("router", "train_decider", local={"quantize_job_id": job_id}, remotes=remotes)
        assert exc.value.details().startswith("local.quantize_job_id: "), exc.value.details()
        return exc.value

    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        other_tenant = refused(bob, quantized.id)
    assert other_tenant.code() == grpc.StatusCode.NOT_FOUND and "no quantizer job" in other_tenant.details()
    assert refused(client, "no-such-job").code() == grpc.StatusCode.NOT_FOUND
    evaluation = finished(client, client.submit("quantizer", "evaluate", quantize_job_id=quantized.id,
                                                data={"stdlib": {"files": 4, "max_chars": 2000}}, windows=2,
                                                seq_len=16))
    silent = refused(client, evaluation.id)
    assert silent.code() == grpc.StatusCode.FAILED_PRECONDITION and "announced no model" in silent.details()
