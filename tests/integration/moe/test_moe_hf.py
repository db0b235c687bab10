"""Upcycling a real Hugging Face causal LM through the stack (Kafka, Celery, gRPC): a Llama folder
uploaded from elsewhere as an archive becomes a Mixtral that AutoModelForCausalLM loads and that
computes the base's logits (copy init), announced as model.tar; the service's model loader opens
it for other services; train_moe trains its routers on text with DPSL and announces the result;
Drop-Upcycling from a server path moves the logits; bases it cannot upcycle, evaluate_routing of an
HF MoE and router terms it cannot take are refused naming the field."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import grpc
import pytest
import torch
from paperworks.shared.announced import load_announced
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.sdk.errors import field_violations
from support import announced_models, finished, service_fixtures
from unit.backends.hf_models import save_family

stack, client = service_fixtures("moe")


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    """The README examples' base: a tiny random Llama with a byte tokenizer (`data llama`)."""
    from paperworks.services.moe.data import write_llama

    return write_llama(tmp_path_factory.mktemp("base") / "llama")


@pytest.fixture(scope="module")
def uploaded(client, llama, tmp_path_factory) -> dict:
    """{"upload": sha256} of the Llama folder archived with the folder on top, the archive deleted."""
    here = tmp_path_factory.mktemp("client-elsewhere")
    with tarfile.open(here / "llama.tar.gz", "w:gz") as tar:
        tar.add(llama, arcname="llama")
    reply = client.upload(here / "llama.tar.gz")
    shutil.rmtree(here)
    return {"upload": reply.artifact.sha256}


@pytest.fixture(scope="module")
def upcycled(client, uploaded):
    job = client.submit("moe", "upcycle", base={"kind": "hf", "source": uploaded}, experts=4, top_k=2)
    return finished(client, job)


def _logits(folder: Path, ids: torch.Tensor) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True, local_files_only=True)
    with torch.no_grad():
        return model.eval()(ids).logits


def test_an_uploaded_llama_becomes_a_mixtral_with_its_logits(client, upcycled, llama, tmp_path):
    r = upcycled.result
    assert r["model_type"] == "mixtral" and r["experts"] == 4 and r["top_k"] == 2
    assert r["max_logit_difference"] < 1e-4 and r["mean_kl"] < 1e-8
    mlp, router = 2 * 3 * 32 * 64, 2 * 4 * 32  # 2 layers: gate/up/down of 32 x 64; a 4 x 32 router
    assert r["parameters"] == r["dense_parameters"] + 3 * mlp + router  # 3 more copies of every MLP
    assert {a.name for a in upcycled.artifacts} == {"model.tar", "upcycle.json"}
    assert announced_models(client, upcycled) == ["model.tar"]
    pulled = {p.name: p for p in client.pull_artifacts(upcycled.id, tmp_path)}
    with tarfile.open(pulled["model.tar"]) as tar:
        tar.extractall(tmp_path / "moe", filter="data")
    ids = torch.randint(0, 259, (2, 12), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(_logits(tmp_path / "moe", ids), _logits(llama, ids), atol=1e-5, rtol=0)


def test_other_services_open_it_through_the_model_loader(stack, upcycled):
    store = JobStore(Database(stack.database_url))
    artifacts = ArtifactStore(stack.settings.state_dir / "artifacts")
    artifact, backend = load_announced(store, artifacts, "alice", "moe", upcycled.id, "local.job_id")
    assert artifact["name"] == "model.tar" and type(backend.module).__name__ == "MixtralForCausalLM"
    assert backend.generate(["ab"], max_new_tokens=2)[0].token_ids


def test_drop_upcycling_from_a_server_path(client, llama, tmp_path):
    job = client.submit("moe", "upcycle", base={"kind": "hf", "path": str(llama)}, init="drop_upcycle",
                        drop_ratio=0.5, experts=2, top_k=1, seed=3)  # fmt: skip
    r = finished(client, job).result
    assert r["model_type"] == "mixtral" and r["max_logit_difference"] > 1e-3 and r["mean_kl"] > 0


def test_train_moe_shapes_its_routers_on_text_and_announces_it(client, stack, upcycled, tmp_path):
    terms = [{"type": "dpsl", "alpha": [0.25]}, {"type": "load_balance", "weight": 0.01}]
    job = client.submit("moe", "train_moe", model_job_id=upcycled.id, router_losses=terms, steps=8,
                        batch_size=4, seq_len=32, eval_sequences=10)  # fmt: skip
    done = finished(client, job)
    r = done.result
    assert 0.25 <= r["confidence"] <= 1.0 and r["max_mean_load"] >= 1.0 and r["held_out_loss"] > 0
    assert len(r["layers"]) == 2 and len(r["layers"][0]["cvm"]) == 4
    assert {a.name for a in done.artifacts} == {"history.json", "routing.json", "model.tar"}
    assert announced_models(client, done) == ["model.tar"]
    store = JobStore(Database(stack.database_url))
    artifacts = ArtifactStore(stack.settings.state_dir / "artifacts")
    _, backend = load_announced(store, artifacts, "alice", "moe", done.id, "local.job_id")
    gates = [layer.mlp.gate.weight for layer in backend.module.model.layers]
    _, first = load_announced(store, artifacts, "alice", "moe", upcycled.id, "local.job_id")
    assert not torch.equal(gates[0], first.module.model.layers[0].mlp.gate.weight)  # the routers moved
    attention = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(backend.module.state_dict()[attention], first.module.state_dict()[attention])


def _refused(call) -> tuple[grpc.StatusCode, list[tuple[str, str]]]:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    return exc.value.code(), field_violations(exc.value)


def test_what_it_cannot_upcycle_is_refused_naming_the_field(client, upcycled, tmp_path):
    gpt2 = save_family(tmp_path / "gpt_neox", "gpt_neox")
    code, fields = _refused(lambda: client.submit("moe", "upcycle", base={"kind": "hf", "path": str(gpt2)}))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and fields[0][0] == "base.source.path"
    assert "'gpt_neox' has no MoE counterpart" in fields[0][1]
    code, fields = _refused(lambda: client.submit("moe", "upcycle", base={"kind": "hf", "path": "/nowhere"}))
    assert fields[0][0] == "base.source.path"
    code, fields = _refused(lambda: client.submit("moe", "evaluate_routing", model_job_id=upcycled.id))
    assert fields[0][0] == "model_job_id" and "Hugging Face" in fields[0][1]
    terms = [{"type": "aux_free_bias"}]
    code, fields = _refused(
        lambda: client.submit("moe", "train_moe", model_job_id=upcycled.id, router_losses=terms)
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and fields[0][0] == "router_losses[0].type"
