"""Transformers families beyond Llama and GPT-2, built tiny from config (no downloads): the block
projections are found whatever the family names them, every method quantizes them, the packed
model equals the fake-quantized one, the checkpoint reloads on a fresh base model, and the
evaluation (held-out loss, per-layer diagnostics) runs on it. Embeddings and the head stay fp."""
from __future__ import annotations

import pytest
import torch
from paperworks.services.quantizer import checkpoint, diagnostics, quantize
from paperworks.services.quantizer.distill import TokenData, evaluate_lm
from paperworks.services.quantizer.linears import find_linears, forward
from paperworks.shared.backends import ModelRef, load_backend
from paperworks.shared.backends.hf import TESTED_MODEL_TYPES
from safetensors.torch import load as st_load
from unit.backends.hf_models import save_family

SMALL = dict(steps=2, batch=2, seq_len=16, calib_windows=4, block_steps=2, init_sweeps=3)
# per family: the names its 2 blocks give the projections (7 per Llama-style block, 4 for GPT-NeoX's
# fused query_key_value, 6 for OPT and Phi)
LLAMA_STYLE = frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})
PROJECTIONS = {
    "qwen2": ("model.layers.", 14, LLAMA_STYLE),
    "gpt_neox": ("gpt_neox.layers.", 8, {"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"}),
    "opt": ("model.decoder.layers.", 12, {"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"}),
    "phi": ("model.layers.", 12, {"q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2"}),
    "gemma": ("model.layers.", 14, LLAMA_STYLE),
    "mistral": ("model.layers.", 14, LLAMA_STYLE),
}


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    return {t: save_family(tmp_path_factory.mktemp(t), t) for t in PROJECTIONS}


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    return TokenData.from_ids(torch.randint(0, 256, (4000,), generator=gen).tolist())


def _module(path):
    return load_backend(ModelRef(kind="hf", path=str(path))).module.float()


def test_the_tested_families_are_the_backends():
    assert set(PROJECTIONS) | {"llama", "gpt2"} <= set(TESTED_MODEL_TYPES)


@pytest.mark.parametrize("family", sorted(PROJECTIONS))
def test_the_block_projections_are_found_and_nothing_else(family_dirs, family):
    prefix, count, leaves = PROJECTIONS[family]
    names = find_linears(_module(family_dirs[family]))
    assert len(names) == count and all(n.startswith(prefix) for n in names)
    assert {n.rsplit(".", 1)[1] for n in names} == leaves


@pytest.mark.parametrize(("family", "method"), [(f, m) for f in ("qwen2", "gpt_neox", "opt")
                                                for m in ("rabit", "lcqat", "scalar_qat")]
                         + [(f, "lcqat") for f in ("phi", "gemma", "mistral")])
def test_quantize_pack_reload_and_evaluate(family_dirs, data, family, method):
    teacher = _module(family_dirs[family])
    student, _ = quantize.quantize(teacher, data, quantize.QuantConfig(method=method, **SMALL))
    packed = quantize.pack(student)
    ids = data.valid_windows(16, 3)
    with torch.no_grad():
        torch.testing.assert_close(forward(packed, ids)[0], forward(student, ids)[0], atol=1e-4, rtol=1e-4)
    blob, manifest = checkpoint.save(packed, method, {"kind": "hf"})
    names = find_linears(teacher)
    assert {layer["name"] for layer in manifest["layers"]} == set(names)
    assert manifest["bits_per_weight"] == 2.0
    stored = st_load(blob)
    assert not any(k.startswith("fp.") and any(k[3:].startswith(n + ".") for n in names) for k in stored)
    assert any(k.startswith("fp.") and "embed" in k for k in stored)  # embeddings stay full precision
    loaded = checkpoint.load(blob, manifest, _module(family_dirs[family]))
    with torch.no_grad():
        torch.testing.assert_close(forward(loaded, ids)[0], forward(packed, ids)[0])
    base, quant = evaluate_lm(teacher, ids)["loss"], evaluate_lm(loaded, ids)["loss"]
    assert abs(quant - base) < 0.5  # random 32-wide models: near-uniform next-token loss either way
    report = diagnostics.layer_report(loaded, teacher, ids)
    assert set(report) == set(names) and all(0 <= d["relative_error"] < 2 for d in report.values())
