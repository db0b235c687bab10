"""Hugging Face modules in the Cornstarch composition, single process: tiny Llama / Qwen2 causal LMs
and CLIP / SigLIP vision towers saved in the real format and loaded from their folders. Their
pipeline layers reproduce the Hugging Face models' outputs (the rotary embeddings computed once per
stage), freezing really skips the HF encoder's weight gradients and saved activations, LoRA wraps
the HF decoder's linears, and profiling, the analytic cost model and the partitioner run on the
composed model. Folders are resolved through the job's model description (`data.config`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from paperworks.services.training import data
from paperworks.services.training.cornstarch import costs, hf, partition
from paperworks.services.training.cornstarch.costs import _saved_bytes
from paperworks.services.training.cornstarch.model import (
    MLLM,
    EncoderConfig,
    Freeze,
    HFDecoderLayer,
    LoRALinear,
    MLLMConfig,
    microbatches,
    synthetic_batch,
)
from paperworks.services.training.spec import ModelDesc
from paperworks.shared.errors import InvalidArgument
from transformers import AutoModel, AutoModelForCausalLM
from transformers.utils import logging as hf_logging
from unit.training.hf_folders import clip_full, clip_vision, llama, qwen2, siglip_vision

hf_logging.disable_progress_bar()
LLMS = {"llama": llama, "qwen2": qwen2}
TOWERS = {"clip": clip_vision, "siglip": siglip_vision, "clip_full": clip_full}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    out = {name: make(root / name) for name, make in {**LLMS, **TOWERS}.items()}
    out["qwen2_tied"] = qwen2(root / "qwen2_tied", seed=1, tie_word_embeddings=True)
    return out


def composed(folders, llm="llama", tower="siglip", text_tokens=8, vocab=16) -> MLLMConfig:
    """The config `data.config` builds for these folders (sizes from their configs)."""
    v = hf.vision_info(folders[tower])
    enc = EncoderConfig(name="vision", hf_path=folders[tower], **v)
    info = hf.llm_info(folders[llm])
    return MLLMConfig(
        encoders=(enc,),
        d_model=info["d_model"],
        llm_layers=info["layers"],
        heads=info["heads"],
        vocab=vocab,
        text_tokens=text_tokens,
        llm_path=folders[llm],
    )


@pytest.mark.parametrize("llm", ["llama", "qwen2", "qwen2_tied"])
def test_hf_decoder_layers_reproduce_the_causal_lm(folders, llm):
    """Text only (the multimodal mask is then causal): our layers' loss equals the loss on the HF
    model's own logits, whole and split in two stages (rotary embeddings computed per stage)."""
    cfg = MLLMConfig(encoders=(), text_tokens=12, vocab=30, llm_path=folders[llm], **_sizes(folders[llm]))
    model = MLLM(cfg)
    batch = synthetic_batch(cfg, 3, 0)
    ref = AutoModelForCausalLM.from_pretrained(folders[llm], local_files_only=True)
    logits = ref(input_ids=batch["tokens"]).logits
    expected = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
    assert float(model(batch).detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    ids = model.layer_ids()
    acts = model.run_layers(ids[:2], {}, batch)  # embed + first decoder layer
    split = model.run_layers(ids[2:], acts, batch)["loss"].detach()
    assert float(split) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert isinstance(model.layer(ids[1]), HFDecoderLayer) and len(ids) == cfg.llm_layers + 2
    if llm == "qwen2_tied":  # untied at composition: the head owns its weight (same values)
        assert model.llm[-1].lm.weight is not model.llm[0].tok.weight
        assert torch.equal(model.llm[-1].lm.weight, model.llm[0].tok.weight)


def _sizes(folder):
    info = hf.llm_info(folder)
    return {"d_model": info["d_model"], "llm_layers": info["layers"], "heads": info["heads"]}


@pytest.mark.parametrize("tower", ["clip", "siglip", "clip_full"])
def test_hf_vision_layers_reproduce_the_tower(folders, tower):
    cfg = composed(folders, tower=tower)
    model = MLLM(cfg)
    batch = synthetic_batch(cfg, 2, 0)
    acts = model.run_layers([("vision", i) for i in range(cfg.encoders[0].layers + 1)], {}, batch)
    ref = AutoModel.from_pretrained(folders[tower], local_files_only=True)
    ref = ref.vision_model if tower == "clip_full" else ref
    hidden = ref(pixel_values=batch["vision"], output_hidden_states=True).hidden_states[-1]
    assert acts["vision"].shape == (2, cfg.encoders[0].tokens, cfg.encoders[0].d_model)
    assert torch.allclose(acts["vision"], hidden, atol=1e-5)
    assert cfg.encoders[0].tokens == 4 + tower.startswith("clip")  # 2x2 patches (+ CLIP's class token)


def test_freezing_the_hf_encoder_skips_its_weight_gradients_and_saved_activations(folders):
    cfg = composed(folders)
    grads = {}
    for pattern in ("frozen_encoder", "all_trainable"):
        model = MLLM(cfg).apply_freeze(Freeze.pattern(pattern, cfg.encoders))
        model(synthetic_batch(cfg, 4, 0)).backward()
        grads[pattern] = {n for n, p in model.named_parameters() if p.grad is not None}
        embed_and_blocks = ("branches.vision.0.", "branches.vision.1.", "branches.vision.2.")
        tower = [n for n, _ in model.named_parameters() if n.startswith(embed_and_blocks)]
        if pattern == "frozen_encoder":
            assert tower and not set(tower) & grads[pattern]
            assert not any(model.needs_grad()[("vision", i)] for i in range(cfg.encoders[0].layers + 1))
            batch = synthetic_batch(cfg, 4, 0)
            lids = [("vision", i) for i in range(3)]
            out, saved = _saved_bytes(lambda m=model, b=batch, lids=lids: m.run_layers(lids, {}, b))
            assert saved == 0 and not out["vision"].requires_grad
        else:
            assert set(tower) <= grads[pattern]
    projector = f"branches.vision.{cfg.encoders[0].layers + 1}."
    assert any(n.startswith(projector) for n in grads["frozen_encoder"])
    assert any(n.startswith("llm.1.layer.") for n in grads["frozen_encoder"])


def test_lora_wraps_the_hf_decoder_and_trains_only_adapters_and_projector(folders):
    cfg = composed(folders, llm="qwen2")
    base = MLLM(cfg)
    batch = synthetic_batch(cfg, 2, 0)
    before = float(base(batch).detach())
    model = base.apply_freeze(Freeze.pattern("frozen_llm_lora", cfg.encoders))
    assert isinstance(model.llm[1].layer.self_attn.q_proj, LoRALinear)
    assert isinstance(model.llm[1].layer.mlp.down_proj, LoRALinear)
    assert float(model(batch).detach()) == pytest.approx(before, rel=1e-6)  # B = 0 at init
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    projector = "branches.vision.3."
    assert trainable and all(n.endswith((".a", ".b")) or n.startswith(projector) for n in trainable)


def test_profile_analytic_costs_and_partition_on_the_composed_hf_model(folders):
    cfg = composed(folders)
    model = MLLM(cfg).apply_freeze(Freeze.pattern("frozen_encoder", cfg.encoders))
    mb = microbatches(synthetic_batch(cfg, 4, 0), 2)[0]
    prof = costs.profile(model, mb, repeats=1)
    assert set(prof) == {f"{m}:{i}" for m, i in model.layer_ids()}
    assert not prof["vision:1"]["needs_grad"] and prof["llm:1"]["needs_grad"] and prof["llm:1"]["bw"] >= 0
    plan = partition.partition(prof, cfg.modules(), 2, 2, "frozen_aware")
    assert sum(len(s["layers"]) for s in plan["stages"]) == sum(cfg.modules().values())
    shapes = MLLM(cfg, weights=False).apply_freeze(Freeze.pattern("frozen_encoder", cfg.encoders))
    assert next(shapes.llm[1].parameters()).device.type == "meta"  # no weights read
    analytic = costs.analytic(shapes, 2)
    assert {k: v["params"] for k, v in analytic.items()} == {k: v["params"] for k, v in prof.items()}
    assert analytic["llm:1"]["f"] > 0 and analytic["vision:1"]["trainable"] == 0


def test_model_description_resolves_hf_folders(folders, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("PAPERWORKS_TRAINING_DATA_ROOT", str(tmp_path_factory.getbasetemp()))
    desc = ModelDesc.model_validate(
        {
            "encoders": [{"name": "vision", "hf": {"kind": "hf", "path": folders["clip"]}}],
            "llm": {"kind": "hf", "path": folders["llama"]},
            "vocab": 1000,
            "text_tokens": 6,
        }
    )
    cfg = data.config(desc)
    assert cfg.d_model == 32 and cfg.llm_layers == 2 and cfg.heads == 4 and cfg.vocab == 40
    assert cfg.encoders[0].tokens == 5 and cfg.encoders[0].image_size == 16 and cfg.modules()["vision"] == 4
    data.check_folders(desc, None)
    wrong = ModelDesc.model_validate({"llm": {"kind": "hf", "path": folders["clip"]}})
    with pytest.raises(InvalidArgument) as exc:
        data.config(wrong)
    assert exc.value.field == "model.llm.source.path" and "clip_vision_model" in exc.value.message
    swapped = ModelDesc.model_validate(
        {"encoders": [{"name": "vision", "hf": {"kind": "hf", "path": folders["llama"]}}]}
    )
    with pytest.raises(InvalidArgument) as exc:
        data.check_folders(swapped, None)
    assert exc.value.field == "model.encoders[0].hf.source.path"


def test_unsupported_folders_are_refused_with_the_reason(folders, tmp_path):
    sliding = qwen2(tmp_path / "sliding", use_sliding_window=True, sliding_window=4, max_window_layers=0)
    with pytest.raises(hf.HFFolderError, match="sliding-window"):
        hf.llm_info(sliding)
    edited = tmp_path / "edited"
    edited.mkdir()
    (edited / "model.safetensors").write_bytes(b"")
    config = json.loads((Path(folders["llama"]) / "config.json").read_text())
    (edited / "config.json").write_text(json.dumps({**config, "hidden_size": "32"}))
    with pytest.raises(hf.HFFolderError, match="hidden_size must be a positive integer"):
        hf.llm_info(edited)
    (edited / "model.safetensors").unlink()
    (edited / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(hf.HFFolderError, match="no model.safetensors"):
        hf.llm_info(edited)
    with pytest.raises(hf.HFFolderError, match="not a supported vision encoder"):
        hf.vision_info(folders["llama"])
