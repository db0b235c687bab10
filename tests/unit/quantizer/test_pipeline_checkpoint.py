"""The pipelines on whole models (the project's tiny decoder and a transformers GPT-2), the
packed model, and the checkpoint round trip."""
from __future__ import annotations

import json

import pytest
import torch
from paperworks.services.quantizer import checkpoint, quantize
from paperworks.services.quantizer.distill import TokenData, distill_loss
from paperworks.services.quantizer.linears import find_linears, forward
from paperworks.services.quantizer.method_names import NAMES
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder
from safetensors.torch import load as st_load

SMALL = dict(steps=2, batch=2, seq_len=16, calib_windows=4, block_steps=2)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return TinyDecoder(TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=32)).eval()


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    return TokenData.from_ids(torch.randint(0, 256, (4000,), generator=gen).tolist())


def test_finds_the_block_projections_but_not_embeddings_or_head(tiny):
    names = find_linears(tiny)
    assert len(names) == 7 and all(n.startswith("layers.0.") for n in names)


def test_distillation_loss_is_zero_against_itself(tiny, data):
    loss, kl, mse = distill_loss(tiny, tiny, data.valid_windows(16, 2), hidden_weight=1.0)
    assert float(loss.detach()) < 1e-6 and float(kl) < 1e-6 and float(mse) < 1e-10


@pytest.mark.parametrize("method", NAMES)
def test_every_method_packs_to_the_same_function_and_round_trips(tiny, data, method):
    progress = []
    student, info = quantize.quantize(tiny, data, quantize.QuantConfig(method=method, **SMALL),
                                      lambda *a: progress.append(a))
    assert {p[2] for p in progress} >= {"init"} | ({"training"} if method != "rtn" else set())
    assert len(info["losses"]) == (0 if method == "rtn" else 2)
    packed = quantize.pack(student)
    ids = data.valid_windows(16, 3)
    with torch.no_grad():
        torch.testing.assert_close(forward(packed, ids)[0], forward(student, ids)[0], atol=1e-4, rtol=1e-4)
    blob, manifest = checkpoint.save(packed, method, {"kind": "tiny"})
    assert manifest["bits_per_weight"] == 2.0 and len(manifest["layers"]) == 7
    assert json.loads(_metadata(blob))["method"] == method
    fresh = TinyDecoder(tiny.config)
    loaded = checkpoint.load(blob, manifest, fresh)
    with torch.no_grad():
        torch.testing.assert_close(forward(loaded, ids)[0], forward(packed, ids)[0])


def _metadata(blob: bytes) -> str:
    header = json.loads(blob[8 : 8 + int.from_bytes(blob[:8], "little")])
    return header["__metadata__"]["manifest"]


def test_gpt2_conv1d_layers_quantize_and_reload():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_positions=32, n_embd=32, n_layer=1, n_head=2)).eval()
    gen = torch.Generator().manual_seed(1)
    data = TokenData.from_ids(torch.randint(0, 300, (3000,), generator=gen).tolist())
    assert find_linears(model) == ["transformer.h.0.attn.c_attn", "transformer.h.0.attn.c_proj",
                                   "transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj"]
    student, _ = quantize.quantize(model, data, quantize.QuantConfig(method="rabit", **SMALL))
    packed = quantize.pack(student)
    blob, manifest = checkpoint.save(packed, "rabit", {"kind": "hf"})
    assert "fp.lm_head.weight" in st_load(blob) and "fp.transformer.wte.weight" in st_load(blob)
    fresh = GPT2LMHeadModel(model.config).eval()
    loaded = checkpoint.load(blob, manifest, fresh)
    ids = data.valid_windows(16, 2)
    with torch.no_grad():
        torch.testing.assert_close(forward(loaded, ids)[0], forward(student, ids)[0], atol=1e-4, rtol=1e-4)


def test_a_checkpoint_of_another_format_is_refused(tiny):
    with pytest.raises(ValueError, match="format"):
        checkpoint.load(b"", {"format": "other"}, tiny)


def test_llama_lcqat_block_reconstruction_runs_on_transformers_blocks():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    model = LlamaForCausalLM(config).eval()
    gen = torch.Generator().manual_seed(2)
    data = TokenData.from_ids(torch.randint(0, 300, (3000,), generator=gen).tolist())
    student, info = quantize.quantize(model, data, quantize.QuantConfig(method="lcqat", **SMALL))
    assert len(info["block_reconstruction_error"]) == 1
    packed = quantize.pack(student)
    ids = data.valid_windows(16, 2)
    with torch.no_grad():
        torch.testing.assert_close(forward(packed, ids)[0], forward(student, ids)[0], atol=1e-4, rtol=1e-4)


def test_one_registry_names_every_method_the_job_accepts():
    from typing import get_args

    from paperworks.services.quantizer import methods
    from paperworks.services.quantizer.spec import QuantizeParams

    assert tuple(methods.METHODS) == NAMES == get_args(QuantizeParams.model_fields["method"].annotation)
    assert {m.format.name for m in methods.METHODS.values()} == set(methods.FORMATS) == {
        "binary2", "lattice2", "int2"}
    with pytest.raises(ValueError, match="unknown method 'gptq'"):
        methods.get("gptq")
