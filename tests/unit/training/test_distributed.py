"""Multi-process checks on torch.distributed (gloo, 2 processes started by our launcher): pipeline
gradients equal single-process gradient accumulation under two freezing patterns, for the model
defined in code and for one composed of Hugging Face folders (Llama + SigLIP, Qwen2 with tied
embeddings + CLIP), ring CP attention over the LPT split equals unsplit masked attention, and the
launcher reaps every process when a rank fails or the caller cancels."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch
from paperworks.services.training.cornstarch import context, launch, pipeline
from paperworks.services.training.cornstarch.model import (
    MLLM,
    EncoderConfig,
    Freeze,
    MLLMConfig,
    synthetic_batch,
)
from transformers.utils import logging as hf_logging
from unit.training.hf_folders import clip_vision, composed_config, llama, qwen2, siglip_vision

CFG = MLLMConfig(
    encoders=(EncoderConfig(tokens=8, input_dim=12, d_model=16, layers=2),),
    d_model=16,
    llm_layers=3,
    heads=2,
    vocab=16,
    text_tokens=8,
)
# two encoder branches on their own ranks feeding the LLM's first stage
TWO = MLLMConfig(
    encoders=(
        EncoderConfig(name="vision", tokens=8, input_dim=12, d_model=16, layers=2),
        EncoderConfig(name="audio", tokens=6, input_dim=10, d_model=16, layers=1),
    ),
    d_model=16,
    llm_layers=2,
    heads=2,
    vocab=16,
    text_tokens=8,
)


def _chain(cfg, cuts):
    ids = [list(x) for x in MLLM(cfg).layer_ids()]
    bounds = [0, *cuts, len(ids)]
    n = len(bounds) - 1
    return [
        {"layers": ids[bounds[s] : bounds[s + 1]], "next": s + 1 if s + 1 < n else None} for s in range(n)
    ]


def _branches(cfg):
    model = MLLM(cfg)
    enc = [[[name, i] for i in range(len(layers))] for name, layers in model.branches.items()]
    llm = [["llm", i] for i in range(len(model.llm))]
    return [{"layers": enc[0], "next": 2}, {"layers": enc[1], "next": 2}, {"layers": llm, "next": None}]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_pipeline_gradients_and_ring_attention_equal_single_process():
    """3 processes: a 3-stage chain (frozen encoder), the two-encoder DAG (frozen LLM + LoRA: the
    encoders' projectors train, so gradients cross both branch edges), and ring attention over the
    LPT split of 5 blocks (unequal shares)."""
    modality = np.array([0] * 100 + [1] * 300 + [0] * 60 + [2] * 90 + [0] * 90)  # 640 tokens, 5 blocks
    cases = [
        (CFG, "frozen_encoder", _chain(CFG, [3, 6]), 4, 8),
        (TWO, "frozen_llm_lora", _branches(TWO), 2, 4),
    ]
    tasks = [
        {
            "kind": "pipeline",
            "model": cfg.to_dict(),
            "pattern": pattern,
            "plan": plan,
            "microbatches": m,
            "batch_size": size,
            "steps": 1,
            "record_grads": True,
        }
        for cfg, pattern, plan, m, size in cases
    ]
    tasks.append({"kind": "cp_attention", "modality": modality.tolist(), "mode": "lpt", "seed": 3, "dim": 8})
    ranks = launch.launch({"kind": "sequence", "tasks": tasks}, 3, timeout=180)
    for t, (cfg, pattern, _, m, size) in enumerate(cases):
        ref = MLLM(cfg).apply_freeze(Freeze.pattern(pattern, cfg.encoders))
        loss = pipeline.reference_step(ref, synthetic_batch(cfg, size, 0), m)
        grads = {k: g for r in ranks for k, g in r[t]["grads"].items()}
        expected = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
        assert set(grads) == set(expected) and expected
        for name, g in expected.items():
            assert torch.allclose(grads[name], g, atol=1e-6, rtol=1e-5), name
        assert ranks[2][t]["losses"][0] == pytest.approx(loss, rel=1e-6)
        assert ranks[0][t]["losses"] == [] and ranks[1][t]["losses"] == []
    assert any("branches.audio" in n for n in ranks[1][1]["grads"])
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(640, 8, generator=g, dtype=torch.float64) for _ in range(3))
    full = context.masked_attention(q, k, v, context.attention_mask(modality))
    pos = torch.cat([r[2]["offsets"] for r in ranks])
    out = torch.cat([r[2]["out"] for r in ranks])
    assert torch.equal(pos.sort().values, torch.arange(640))
    assert len({len(r[2]["offsets"]) for r in ranks}) > 1  # unequal shares
    assert torch.allclose(out, full[pos], atol=1e-10)


def test_hf_pipeline_gradients_equal_single_process(tmp_path):
    """2 processes, each loading the folders: Llama + SigLIP with the encoder frozen (cut inside the
    LLM: rotary embeddings computed on both stages), and Qwen2 (tied embeddings) + CLIP all
    trainable (cut inside the encoder: gradients cross back into it)."""
    hf_logging.disable_progress_bar()
    cases = [
        (composed_config(siglip_vision(tmp_path / "siglip"), llama(tmp_path / "llama")), "frozen_encoder", 6),
        (composed_config(clip_vision(tmp_path / "clip"), qwen2(tmp_path / "qwen2", tie_word_embeddings=True)),
         "all_trainable", 2),
    ]  # fmt: skip
    tasks = [
        {
            "kind": "pipeline",
            "model": cfg.to_dict(),
            "pattern": pattern,
            "plan": _chain(cfg, [cut]),
            "microbatches": 2,
            "batch_size": 4,
            "steps": 1,
            "record_grads": True,
        }
        for cfg, pattern, cut in cases
    ]
    ranks = launch.launch({"kind": "sequence", "tasks": tasks}, 2, timeout=180)
    for t, (cfg, pattern, _) in enumerate(cases):
        ref = MLLM(cfg).apply_freeze(Freeze.pattern(pattern, cfg.encoders))
        loss = pipeline.reference_step(ref, synthetic_batch(cfg, 4, 0), 2)
        grads = {k: g for r in ranks for k, g in r[t]["grads"].items()}
        expected = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
        assert set(grads) == set(expected) and expected
        for name, g in expected.items():
            assert torch.allclose(grads[name], g, atol=1e-6, rtol=1e-5), name
        assert ranks[1][t]["losses"][0] == pytest.approx(loss, rel=1e-6) and ranks[0][t]["losses"] == []
        tower = [n for n, _ in ref.named_parameters() if n.startswith("branches.vision.1.")]
        assert tower and (set(tower) <= set(grads)) == (pattern == "all_trainable")


def test_launcher_reaps_on_failure_and_on_cancel():
    bad = {"kind": "no_such_task"}
    pids = []
    with pytest.raises(launch.WorkerFailed):
        launch.launch(bad, 1, on_start=pids.extend, timeout=60)
    assert len(pids) == 1 and not any(_alive(p) for p in pids)

    class Cancelled(Exception):
        pass

    started = time.monotonic()
    hang = {"kind": "cp_attention", "modality": [0] * 256, "mode": "lpt", "hang_rank": 1}
    pids.clear()

    def poll(records):
        if time.monotonic() - started > 1.0:
            raise Cancelled

    with pytest.raises(Cancelled):
        launch.launch(hang, 2, poll=poll, on_start=pids.extend, timeout=60)
    assert len(pids) == 2 and not any(_alive(p) for p in pids)
