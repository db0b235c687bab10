"""An upcycled Mixtral (transformers' fused 3-D experts) through the quantizer service on the
embedded stack: a RaBiT job packs only the attention projections and its result, manifest,
progress and model-ready announcement say so (the quantized fraction, the experts and routers left
float32, bits per weight over every block weight); an RTN job splits the experts into packed
per-expert layers, so all but the routers is quantized, and the checkpoint evaluates (experts
diagnosed too) and serves Generate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from paperworks.quantizer.v1 import quantizer_pb2
from paperworks.v1 import jobs_pb2
from support import finished, service_fixtures

DATA = {"stdlib": {"files": 8, "max_chars": 4000, "seed": 1}}
SMALL = {"seq_len": 32, "batch_size": 4, "calibration_windows": 4, "token_budget": 0}

stack, client = service_fixtures("quantizer")


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory) -> str:
    """A server folder: the moe service's tiny Llama, Drop-Upcycled to 4 experts (top 2)."""
    from paperworks.services.moe.data import write_llama
    from paperworks.services.moe.hf_upcycle import upcycle_causal_lm
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("moe")
    llama = write_llama(root / "llama")
    dense = AutoModelForCausalLM.from_pretrained(llama, use_safetensors=True, local_files_only=True)
    moe, _ = upcycle_causal_lm(dense, experts=4, top_k=2, drop_ratio=0.5, seed=0)
    moe.save_pretrained(root / "mixtral")
    for f in llama.glob("tokenizer*"):
        shutil.copy(f, root / "mixtral" / f.name)
    return str(root / "mixtral")


def _quantize(client, path, method, **extra):
    return finished(client, client.submit("quantizer", "quantize", model={"kind": "hf", "path": path},
                                          method=method, data=DATA, **SMALL, **extra))


def test_rabit_leaves_the_experts_float_and_every_report_says_so(client, mixtral, tmp_path):
    job = _quantize(client, mixtral, "rabit", init_sweeps=3)
    r = job.result
    assert r["bits_per_weight"] == 2.0 and r["layers"] == 8 and r["unfused_experts"] == 0
    assert r["quantized_fraction"] < 0.15 and r["bits_per_block_weight"] > 25
    assert set(r["float_weights"]) == {"experts (fused, 3-D)", "routers"}
    assert "experts (fused, 3-D)" in r["warning"]
    events = list(client.watch(job.id, timeout=30))
    coverage = [e.progress.message for e in events if e.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS
                and e.progress.stage == "coverage"]
    assert len(coverage) == 1 and "experts (fused, 3-D)" in coverage[0]
    assert "bits per block weight" in coverage[0]
    ready = [e.message for e in events if e.type == jobs_pb2.JOB_EVENT_TYPE_MODEL_READY]
    assert len(ready) == 1 and "experts (fused, 3-D)" in ready[0]
    paths = {p.name: p for p in client.pull_artifacts(job.id, tmp_path)}
    manifest = json.loads(Path(paths["manifest.json"]).read_text())
    assert manifest["quantized_fraction"] == r["quantized_fraction"] and "warning" in manifest


def test_rtn_quantizes_the_experts_evaluates_and_serves(client, mixtral):
    job = _quantize(client, mixtral, "rtn")
    r = job.result
    assert r["layers"] == 2 * (4 + 2 * 4) and r["unfused_experts"] == 2
    assert r["quantized_fraction"] > 0.99 and set(r["float_weights"]) == {"routers"}
    assert 2.0 < r["bits_per_block_weight"] < 4.2
    ev = finished(client, client.submit("quantizer", "evaluate", quantize_job_id=job.id, data=DATA, windows=4,
                                        seq_len=32))
    assert ev.result["quantized_fraction"] == r["quantized_fraction"]
    assert ev.result["quantized"]["perplexity"] > 1 and ev.result["perplexity_ratio"] > 0
    request = quantizer_pb2.GenerateRequest(quantize_job_id=job.id, prompts=["def f("], max_new_tokens=4)
    reply = client.stub("quantizer").Generate(request, metadata=client.metadata, timeout=60)
    assert len(reply.completions[0].token_ids) >= 1
