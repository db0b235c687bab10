"""A sparse-upcycled Mixtral (transformers 5.x: fused 3-D experts, a router module, no nn.Linear in
the experts), built from config, no downloads. The accounting counts every weight matrix of the
blocks: a method that calibrates per layer (RaBiT) packs only the attention projections and the
manifest says so (quantized fraction, what stayed float, bits per block weight far above 2);
round-to-nearest splits the experts into one packed layer per expert, so all but the routers is
quantized, the packed model computes exactly the per-expert RTN of the fused weights, and the
checkpoint reloads on a fresh (fused) base model."""

from __future__ import annotations

import pytest
import torch
from paperworks.services.moe.hf_upcycle import upcycle_causal_lm
from paperworks.services.quantizer import checkpoint, coverage, diagnostics, experts, quantize
from paperworks.services.quantizer.distill import TokenData
from paperworks.services.quantizer.linears import find_linears, forward

SIZES = {"vocab_size": 259, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}  # fmt: skip
E = 4
FAST = dict(steps=0, batch=2, seq_len=16, calib_windows=4, init_sweeps=3)


def _moe(family: str = "llama", **extra):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    dense = AutoModelForCausalLM.from_config(AutoConfig.for_model(family, **(SIZES | extra))).eval()
    return upcycle_causal_lm(dense, experts=E, top_k=2, drop_ratio=0.5, seed=1)[0].float().eval()


@pytest.fixture(scope="module")
def mixtral():
    return _moe()


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    return TokenData.from_ids(torch.randint(0, 256, (4000,), generator=gen).tolist())


def _sizes(model) -> tuple[int, int, int]:
    """(attention, experts, router) weights of the blocks, counted from the model itself."""
    attn = sum(p.numel() for n, p in model.named_parameters() if ".self_attn." in n and p.dim() == 2)
    expert = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    router = sum(p.numel() for n, p in model.named_parameters() if n.endswith("mlp.gate.weight"))
    return attn, expert, router


@pytest.mark.parametrize(("family", "extra"), [("llama", {}), ("qwen2", {}), ("qwen3", {"head_dim": 12})])
@torch.no_grad()
def test_one_linear_per_expert_computes_the_fused_experts(family, extra):
    moe = _moe(family, **extra)
    split = _moe(family, **extra)
    names = experts.unfuse(split)
    assert len(names) == 2 and experts.fused_names(split) == [] and experts.unfused_names(split) == names
    ids = torch.randint(0, 256, (3, 20), generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(forward(split, ids)[0], forward(moe, ids)[0], atol=1e-5, rtol=0)
    assert len(find_linears(split)) == len(find_linears(moe)) + 2 * 2 * E


def test_calibrated_method_keeps_experts_float_and_says_so(mixtral, data):
    progress = []
    student, info = quantize.quantize(mixtral, data, quantize.QuantConfig(method="rabit", **FAST),
                                      lambda *a: progress.append(a))
    packed = quantize.pack(student)
    _, manifest = checkpoint.save(packed, "rabit", {"kind": "hf"})
    attn, expert, router = _sizes(mixtral)
    total = attn + expert + router
    assert manifest["bits_per_weight"] == 2.0 and len(manifest["layers"]) == 8  # q, k, v, o per block
    assert manifest["unfused_experts"] == []
    cov = manifest["coverage"]
    assert cov["block_weights"] == total and cov["quantized_weights"] == attn
    assert manifest["quantized_fraction"] == pytest.approx(attn / total) and attn / total < 0.15
    assert {k: v["weights"] for k, v in cov["float_weights"].items()} == {
        coverage.EXPERTS: expert, coverage.ROUTERS: router}
    packed_bits = manifest["bits_per_weight_with_scales"] * attn
    assert manifest["bits_per_block_weight"] == pytest.approx((packed_bits + 32 * (expert + router)) / total)
    assert manifest["bits_per_block_weight"] > 25  # mostly float32, not "2 bits"
    assert "experts (fused, 3-D)" in manifest["warning"] and "routers" in manifest["warning"]
    assert info["coverage"]["quantized_fraction"] == pytest.approx(attn / total)
    assert any(p[2] == "init" and "experts (fused, 3-D)" in p[3] for p in progress)


def _rtn(w: torch.Tensor, group: int) -> torch.Tensor:
    """Min-max 2-bit round-to-nearest of (N, M) weights per group of columns, dequantized."""
    g = w.reshape(w.shape[0], -1, group)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    scale = (hi - lo) / 3
    return (torch.round((g - lo) / scale).clamp(0, 3) * scale + lo).reshape(w.shape)


@torch.no_grad()
def test_rtn_quantizes_every_expert_and_round_trips(mixtral, data):
    student, _ = quantize.quantize(mixtral, data, quantize.QuantConfig(method="rtn", **FAST))
    packed = quantize.pack(student)
    blob, manifest = checkpoint.save(packed, "rtn", {"kind": "hf"})
    attn, expert, router = _sizes(mixtral)
    total = attn + expert + router
    assert manifest["unfused_experts"] == [f"model.layers.{i}.mlp.experts" for i in range(2)]
    assert len(manifest["layers"]) == 2 * (4 + 2 * E)
    assert manifest["quantized_fraction"] == pytest.approx((attn + expert) / total)
    assert manifest["quantized_fraction"] > 0.99
    assert set(manifest["coverage"]["float_weights"]) == {coverage.ROUTERS}
    stored = sum(layer["bits_per_weight_with_scales"] * layer["shape"][0] * layer["shape"][1]
                 for layer in manifest["layers"])
    assert manifest["bits_per_block_weight"] == pytest.approx((stored + 32 * router) / total)
    assert manifest["bits_per_block_weight"] < 4.2  # codes + row/group scales + float routers

    # the packed model is the fused model with each expert's slices round-to-nearest (per row of 32
    # for gate_up, per group of 64 for down), attention likewise: an independent reference
    reference = _moe()
    for name, p in reference.named_parameters():
        if ".self_attn." in name and p.dim() == 2:
            p.copy_(_rtn(p, 32))
        elif name.endswith("gate_up_proj") or name.endswith("down_proj"):
            p.copy_(torch.stack([_rtn(w, 32 if w.shape[1] == 32 else 64) for w in p]))
    ids = data.valid_windows(16, 3)
    logits = forward(packed, ids)[0]
    torch.testing.assert_close(logits, forward(reference, ids)[0], atol=1e-4, rtol=1e-4)
    base = forward(mixtral, ids)[0]
    assert (logits - base).norm() / base.norm() < 0.5  # 2-bit, yet the same model's logits
    assert torch.corrcoef(torch.stack([logits.flatten(), base.flatten()]))[0, 1] > 0.9

    loaded = checkpoint.load(blob, manifest, _moe())  # a fresh base with fused experts
    torch.testing.assert_close(forward(loaded, ids)[0], logits)
    report = diagnostics.layer_report(loaded, mixtral, ids)
    assert sum(".experts.down." in n for n in report) >= E  # the experts are diagnosed too
    assert all(0 <= d["relative_error"] < 1 for d in report.values())


def test_a_dense_model_is_fully_quantized_without_a_warning(data):
    from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder

    torch.manual_seed(0)
    tiny = TinyDecoder(TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=32)).eval()
    student, _ = quantize.quantize(tiny, data, quantize.QuantConfig(method="rtn", **FAST))
    _, manifest = checkpoint.save(quantize.pack(student), "rtn", {"kind": "tiny"})
    assert manifest["quantized_fraction"] == 1.0 and manifest["coverage"]["float_weights"] == {}
    assert "warning" not in manifest and manifest["unfused_experts"] == []
    assert manifest["bits_per_block_weight"] == pytest.approx(manifest["bits_per_weight_with_scales"])


def test_scalar_qat_trains_split_experts_of_a_qwen2_moe(data):
    """Qwen2-MoE: a zero-width shared expert (nothing to quantize) beside the fused experts;
    scalar QAT (RTN init, no calibration) splits them and its QAT steps reach the experts."""
    moe = _moe("qwen2")
    cfg = quantize.QuantConfig(method="scalar_qat", **(FAST | {"steps": 2}))
    student, info = quantize.quantize(moe, data, cfg)
    assert len(info["losses"]) == 2 and len(info["unfused_experts"]) == 2
    layer = student.model.layers[0].mlp.experts.down[0]
    assert not torch.equal(layer.log_gain, torch.zeros_like(layer.log_gain))  # trained
    _, manifest = checkpoint.save(quantize.pack(student), "scalar_qat", {"kind": "hf"})
    assert manifest["quantized_fraction"] > 0.99
    assert set(manifest["coverage"]["float_weights"]) == {coverage.ROUTERS}
