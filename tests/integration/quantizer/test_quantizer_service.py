"""The quantizer service over real gRPC on the embedded stack: quantize a tiny decoder, watch its
per-layer and per-step progress and its model-ready event (in the job's events and on the
Kafka topic), serve it with Generate/Score on the packed kernels, evaluate it; quantize, evaluate
and serve a transformers model and text that a client in another working directory uploaded
(then deleted: nothing is shared but the uploads); refuse model directories it cannot quantize
with INVALID_ARGUMENT naming model.source.path, and Evaluate references to another tenant's job
or to a job of another kind at submit."""
from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path

import grpc
import pytest
import torch
from paperworks.quantizer.v1 import quantizer_pb2
from paperworks.services.quantizer import checkpoint
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.backends.tiny_data import stdlib_texts
from paperworks.shared.backends.tiny_model import TinyConfig, load_tiny, save_tiny
from paperworks.shared.backends.tiny_train import train_tiny_lm
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from paperworks.v1 import jobs_pb2
from support import TOKENS, finished, service_fixtures

DATA = {"stdlib": {"files": 8, "max_chars": 4000, "seed": 1}}
SMALL = {"seq_len": 32, "batch_size": 4, "calibration_windows": 4}


stack, client = service_fixtures("quantizer")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    texts = stdlib_texts(max_files=8, max_chars=4000, seed=1)
    config = TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=64)
    return str(save_tiny(tmp_path_factory.mktemp("tiny") / "model",
                         train_tiny_lm(texts, config, steps=60, seed=0, batch_size=8).module))


@pytest.fixture(scope="module")
def rabit_job(client, model_dir):
    job = client.submit("quantizer", "quantize", model={"kind": "tiny", "path": model_dir}, method="rabit",
                        data=DATA, token_budget=10 * 4 * 32, **SMALL)
    return finished(client, job)


def test_quantize_reports_layers_steps_and_announces_the_model(client, rabit_job, stack, tmp_path):
    result = rabit_job.result
    assert result["method"] == "rabit" and result["bits_per_weight"] == 2.0
    assert set(result["bits_per_weight_parts"]) == {"g", "h"}  # RaBiT's float vectors, counted
    assert result["layers"] == 7 and result["steps"] == 10 and result["tokens"] == 1280
    events = list(client.watch(rabit_job.id, timeout=30))
    progress = [e.progress for e in events if e.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS]
    assert {"init", "training"} <= {p.stage for p in progress}
    assert [p.step for p in progress if p.stage == "init"][-1] == 7
    assert [p.step for p in progress if p.stage == "training"][-1] == 10
    ready = [i for i, e in enumerate(events) if e.type == jobs_pb2.JOB_EVENT_TYPE_MODEL_READY]
    added = [i for i, e in enumerate(events) if e.type == jobs_pb2.JOB_EVENT_TYPE_ARTIFACT_ADDED]
    assert len(ready) == 1 and len(added) == 2 and max(added) < ready[0]
    announced_ref = events[ready[0]].artifact
    assert announced_ref.sha256 == result["checkpoint_sha256"] and announced_ref.name == "model.safetensors"
    assert "rabit 2-bit checkpoint" in events[ready[0]].message
    paths = {p.name: p for p in client.pull_artifacts(rabit_job.id, tmp_path)}
    manifest = json.loads(paths["manifest.json"].read_text())
    assert manifest["format"] == checkpoint.FORMAT and manifest["bits_per_weight"] == 2.0
    assert {layer["format"] for layer in manifest["layers"]} == {"binary2"}

    from kafka import KafkaConsumer

    consumer = KafkaConsumer("paperworks.events", bootstrap_servers=stack.state.env[
        "PAPERWORKS_KAFKA_BOOTSTRAP_SERVERS"], auto_offset_reset="earliest", consumer_timeout_ms=15000,
        group_id=None)
    announced = None
    for record in consumer:
        event = json.loads(record.value)
        if event["job_id"] == rabit_job.id and event["type"] == "MODEL_READY":
            announced = event
            break
    consumer.close()
    assert announced is not None and announced["service"] == "quantizer" and announced["kind"] == "quantize"
    assert announced["artifact"]["sha256"] == result["checkpoint_sha256"]


def test_generate_and_score_serve_the_packed_checkpoint(client, rabit_job, model_dir, tmp_path):
    stub = client.stub("quantizer")
    request = quantizer_pb2.GenerateRequest(quantize_job_id=rabit_job.id, prompts=["def ", "import "],
                                            max_new_tokens=12)
    reply = stub.Generate(request, metadata=client.metadata, timeout=60)
    assert len(reply.completions) == 2
    paths = {p.name: p for p in client.pull_artifacts(rabit_job.id, tmp_path)}
    local = TinyBackend(checkpoint.load(paths["model.safetensors"].read_bytes(),
                                        json.loads(paths["manifest.json"].read_text()), load_tiny(model_dir)))
    expected = local.generate(["def ", "import "], max_new_tokens=12)
    assert [list(c.token_ids) for c in reply.completions] == [g.token_ids for g in expected]
    assert [c.text for c in reply.completions] == [g.text for g in expected]
    fp = TinyBackend(load_tiny(model_dir)).generate(["def "], max_new_tokens=12)[0]
    assert fp.logprobs != list(reply.completions[0].logprobs)  # it really is the quantized model
    scored = stub.Score(quantizer_pb2.ScoreRequest(quantize_job_id=rabit_job.id, prompts=["def "],
                                                   continuations=["main():"]),
                        metadata=client.metadata, timeout=60)
    want = local.score(["def "], ["main():"])[0]
    assert len(scored.scores[0].logprobs) == 7
    torch.testing.assert_close(scored.scores[0].total_logprob, want.total, atol=1e-4, rtol=1e-4)


def test_lcqat_job_and_evaluate_with_diagnostics(client, model_dir, rabit_job):
    lc = finished(client, client.submit(
        "quantizer", "quantize", model={"kind": "tiny", "path": model_dir}, method="lcqat", data=DATA,
        block_steps=3, block_latent_lr=0.01, e2e_steps=2, e2e_latent_lr=0.01, **SMALL))
    assert lc.result["bits_per_weight"] == 2.0 and lc.result["steps"] == 0
    stages = [e.progress.stage for e in client.watch(lc.id, timeout=30)
              if e.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS]
    assert {"init", "block_reconstruction", "end_to_end"} <= set(stages)
    evals = {}
    for job in (rabit_job, lc):
        ev = finished(client, client.submit("quantizer", "evaluate", quantize_job_id=job.id, data=DATA,
                                            windows=8, seq_len=32))
        evals[job.result["method"]] = ev.result
        assert {a.name for a in ev.artifacts} == {"evaluation.json"}
        assert ev.result["quantized"]["perplexity"] > 1 and ev.result["base"]["bits_per_byte"] > 0
    assert "corr_y1_y2" in evals["rabit"]["layer_mean"] and "corr_y1_y2" not in evals["lcqat"]["layer_mean"]


def test_unsupported_models_are_invalid_argument_and_nothing_is_written(client, tmp_path, model_dir):
    t5 = tmp_path / "t5"  # an encoder-decoder: not a causal LM transformers loads
    t5.mkdir()
    (t5 / "config.json").write_text(json.dumps({"model_type": "t5"}))
    weightless = tmp_path / "weightless"
    weightless.mkdir()
    (weightless / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (weightless / "pytorch_model.bin").write_bytes(b"")
    empty = tmp_path / "empty"
    empty.mkdir()
    before = len(client.list("quantizer", page_size=500)[0])
    cases = (("hf", t5, "model_type 't5' is not a causal language model"),
             ("hf", weightless, "pickle weights (pytorch_model.bin) are never loaded"),
             ("hf", empty, "no config.json"),
             ("tiny", tmp_path / "missing", "not a directory"))
    for kind, path, reason in cases:
        with pytest.raises(grpc.RpcError) as exc:
            client.submit("quantizer", "quantize", model={"kind": kind, "path": str(path)}, method="rabit",
                          data=DATA)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        violations = field_violations(exc.value)
        assert [f for f, _ in violations] == ["model.source.path"] and reason in violations[0][1], violations
    with pytest.raises(grpc.RpcError) as exc:
        client.submit("quantizer", "quantize", model={"kind": "tiny", "path": model_dir}, method="gptq",
                      data=DATA)
    assert [f for f, _ in field_violations(exc.value)] == ["method"]
    assert len(client.list("quantizer", page_size=500)[0]) == before


def test_another_tenant_cannot_use_the_model(stack, rabit_job):
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        with pytest.raises(grpc.RpcError) as exc:
            bob.stub("quantizer").Generate(quantizer_pb2.GenerateRequest(quantize_job_id=rabit_job.id,
                                                                         prompts=["x"]),
                                           metadata=bob.metadata, timeout=30)
        assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_an_explicit_zero_is_a_value_refused_where_out_of_range(client, model_dir, rabit_job):
    # Unset optional fields take their defaults (the jobs above); a 0 sent on purpose is validated.
    for field in ("seq_len", "batch_size", "learning_rate"):
        with pytest.raises(grpc.RpcError) as exc:
            client.submit("quantizer", "quantize", model={"kind": "tiny", "path": model_dir}, method="rabit",
                          data=DATA, **{field: 0})
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in field_violations(exc.value)] == [field]
    with pytest.raises(grpc.RpcError) as exc:
        request = quantizer_pb2.GenerateRequest(quantize_job_id=rabit_job.id, prompts=["x"], max_new_tokens=0)
        client.stub("quantizer").Generate(request, metadata=client.metadata, timeout=30)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(exc.value)] == ["max_new_tokens"]


@pytest.mark.parametrize(("family", "method"),
                         [("qwen2", "rabit"), ("gpt_neox", "lcqat"), ("opt", "scalar_qat")])
def test_transformers_families_quantize_evaluate_and_serve(client, tmp_path, family, method):
    """Families beyond Llama / GPT-2 (tiny, from config): a quantize job, an evaluate job and Generate."""
    from unit.backends.hf_models import save_family

    path = str(save_family(tmp_path / family, family))
    job = finished(client, client.submit("quantizer", "quantize", model={"kind": "hf", "path": path},
                                         method=method, data=DATA, token_budget=2 * 4 * 32, init_sweeps=3,
                                         block_steps=2, **SMALL))
    r = job.result
    layers = {"qwen2": 14, "gpt_neox": 8, "opt": 12}[family]
    assert r["layers"] == layers and r["bits_per_weight"] == 2.0 and r["bits_per_weight_with_scales"] > 2.0
    assert r["bits_per_weight_with_scales"] == pytest.approx(2.0 + sum(r["bits_per_weight_parts"].values()))
    ev = finished(client, client.submit("quantizer", "evaluate", quantize_job_id=job.id, data=DATA, windows=4,
                                        seq_len=32))
    assert len(json.loads(next(iter(client.pull_artifacts(ev.id, tmp_path))).read_text())["layers"]) == layers
    assert ev.result["quantized"]["perplexity"] > 1 and ev.result["perplexity_ratio"] > 0
    request = quantizer_pb2.GenerateRequest(quantize_job_id=job.id, prompts=["def f("], max_new_tokens=4)
    reply = client.stub("quantizer").Generate(request, metadata=client.metadata, timeout=60)
    assert len(reply.completions[0].token_ids) >= 1


@pytest.fixture(scope="module")
def uploads(client, tmp_path_factory):
    """{"upload": sha256} of a transformers GPT-2 folder (archived as `tar czf gpt2.tar.gz gpt2/`
    does, the folder itself inside) and of a text file, uploaded by a client working in a folder
    of its own; both are deleted before any job runs."""
    from unit.backends.hf_models import save_gpt2

    here = tmp_path_factory.mktemp("client-elsewhere")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(here)
        save_gpt2(Path("gpt2"))
        with tarfile.open("gpt2.tar.gz", "w:gz") as tar:
            tar.add("gpt2")
        Path("corpus.txt").write_text("\n".join(stdlib_texts(max_files=8, max_chars=4000, seed=1)))
        model, text = client.upload(Path("gpt2.tar.gz")), client.upload(Path("corpus.txt"))
        shutil.rmtree("gpt2")
        for name in ("gpt2.tar.gz", "corpus.txt"):
            Path(name).unlink()
    return {"upload": model.artifact.sha256}, {"upload": text.artifact.sha256}


@pytest.fixture(scope="module")
def uploaded_job(client, uploads):
    model, text = uploads
    return finished(client, client.submit("quantizer", "quantize", model={"kind": "hf", "source": model},
                                          method="rabit", data={"source": text}, token_budget=2 * 4 * 32,
                                          init_sweeps=3, **SMALL))


def test_a_model_and_text_uploaded_from_elsewhere_quantize_evaluate_and_serve(client, uploads, uploaded_job,
                                                                             tmp_path):
    assert uploaded_job.result["layers"] == 8 and uploaded_job.result["bits_per_weight"] == 2.0
    paths = {p.name: p for p in client.pull_artifacts(uploaded_job.id, tmp_path)}
    assert {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in paths.items()} == {
        a.name: a.sha256 for a in uploaded_job.artifacts}
    manifest = json.loads(paths["manifest.json"].read_text())
    assert manifest["base_model"] == {"kind": "hf", "source": uploads[0]}
    ev = finished(client, client.submit("quantizer", "evaluate", quantize_job_id=uploaded_job.id,
                                        data={"source": uploads[1]}, windows=4, seq_len=32))
    assert ev.result["quantized"]["perplexity"] > 1
    request = quantizer_pb2.GenerateRequest(quantize_job_id=uploaded_job.id, prompts=["def f("],
                                            max_new_tokens=4)
    reply = client.stub("quantizer").Generate(request, metadata=client.metadata, timeout=60)
    assert len(reply.completions[0].token_ids) >= 1


def test_uploads_that_are_not_model_folders_are_refused_at_submit(client, uploads):
    before = len(client.list("quantizer", page_size=500)[0])
    with pytest.raises(grpc.RpcError) as exc:  # a text file is no model folder
        client.submit("quantizer", "quantize", model={"kind": "hf", "source": uploads[1]}, method="rtn",
                      data=DATA)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(exc.value)] == ["model.source.upload"]
    with Client(endpoints=client.endpoints, token=TOKENS["bob"]) as bob, pytest.raises(grpc.RpcError) as exc:
        bob.submit("quantizer", "quantize", model={"kind": "hf", "source": uploads[0]}, method="rtn",
                   data=DATA)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND  # alice's upload is not bob's to name
    assert exc.value.details().startswith("model.source.upload: no upload")
    assert len(client.list("quantizer", page_size=500)[0]) == before


def test_evaluate_refuses_a_wrong_kind_or_another_tenants_job_at_submit(client, stack, rabit_job):
    evaluation = finished(client, client.submit("quantizer", "evaluate", quantize_job_id=rabit_job.id,
                                                data=DATA, windows=2, seq_len=32))
    before = len(client.list("quantizer", page_size=500)[0])
    with pytest.raises(grpc.RpcError) as exc:
        client.submit("quantizer", "evaluate", quantize_job_id=evaluation.id, data=DATA)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "not quantize" in exc.value.details()
    assert [f for f, _ in field_violations(exc.value)] == ["quantize_job_id"]
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob, pytest.raises(grpc.RpcError) as exc:
        bob.submit("quantizer", "evaluate", quantize_job_id=rabit_job.id, data=DATA)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND
    assert exc.value.details().startswith("quantize_job_id: no quantizer job")
    assert len(client.list("quantizer", page_size=500)[0]) == before
