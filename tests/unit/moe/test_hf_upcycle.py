"""Sparse upcycling of real transformers causal LMs (built from configs, no downloads): with copy
init the MoE computes the dense model's logits (every expert a copy, the renormalised top-k gates
sum to one); Drop-Upcycling re-initialises exactly its share of each expert's neurons and keeps the
rest; the saved archive loads with AutoModelForCausalLM and the platform's hf backend; families and
parameters it cannot upcycle are refused, naming the field."""

from __future__ import annotations

import io
import tarfile

import pytest
import torch
from paperworks.services.moe import hf_model
from paperworks.services.moe.hf_upcycle import moe_config, upcycle_causal_lm
from paperworks.services.moe.spec import UpcycleParams
from pydantic import ValidationError
from unit.backends.hf_models import save_llama

SIZES = {"vocab_size": 259, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}  # fmt: skip


def _dense(model_type: str = "llama", **extra):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **(SIZES | extra))
    return AutoModelForCausalLM.from_config(config).eval()


def _ids(n: int = 3, length: int = 24) -> torch.Tensor:
    return torch.randint(0, SIZES["vocab_size"], (n, length), generator=torch.Generator().manual_seed(1))


@torch.no_grad()
def test_copy_upcycled_llama_is_the_dense_model():
    dense = _dense()
    moe, report = upcycle_causal_lm(dense, experts=4, top_k=2, seed=3)
    assert type(moe).__name__ == "MixtralForCausalLM" and report.moe_type == "mixtral"
    ids = _ids()
    torch.testing.assert_close(moe(ids).logits, dense(ids).logits, atol=1e-5, rtol=0)
    for d_layer, m_layer in zip(dense.model.layers, moe.model.layers, strict=True):
        experts = m_layer.mlp.experts
        gate_up = torch.cat([d_layer.mlp.gate_proj.weight, d_layer.mlp.up_proj.weight], 0)
        for e in range(4):  # every expert a copy of the dense MLP
            assert torch.equal(experts.gate_up_proj[e], gate_up)
            assert torch.equal(experts.down_proj[e], d_layer.mlp.down_proj.weight)
        hidden = torch.randn(50, SIZES["hidden_size"])
        logits, gates, chosen = m_layer.mlp.gate(hidden)
        assert chosen.shape == (50, 2) and logits.std() > 0  # a new, non-degenerate router
        torch.testing.assert_close(gates.sum(-1), torch.ones(50))  # top-k weights sum to one


@pytest.mark.parametrize(("family", "moe_type", "extra"), [
    ("mistral", "mixtral", {}), ("qwen2", "qwen2_moe", {}), ("qwen3", "qwen3_moe", {"head_dim": 12}),
])  # fmt: skip
@torch.no_grad()
def test_other_families_upcycle_to_their_moe_class(family, moe_type, extra):
    dense = _dense(family, **extra)
    moe, _ = upcycle_causal_lm(dense, experts=3, top_k=1)
    assert moe.config.model_type == moe_type
    ids = _ids(2, 16)
    torch.testing.assert_close(moe(ids).logits, dense(ids).logits, atol=1e-5, rtol=0)


@torch.no_grad()
def test_drop_upcycling_reinitialises_its_share_and_keeps_the_rest():
    dense = _dense()
    moe, report = upcycle_causal_lm(dense, experts=4, top_k=2, drop_ratio=0.25, seed=0)
    inter = SIZES["intermediate_size"]
    for layer, (d_layer, m_layer) in enumerate(zip(dense.model.layers, moe.model.layers, strict=True)):
        gate, up, down = (
            d_layer.mlp.gate_proj.weight,
            d_layer.mlp.up_proj.weight,
            d_layer.mlp.down_proj.weight,
        )
        chosen = report.dropped[layer]
        assert all(len(units) == 16 for units in chosen) and len({tuple(u) for u in chosen}) == 4
        for e, units in enumerate(chosen):
            kept = sorted(set(range(inter)) - set(units))
            g, u = m_layer.mlp.experts.gate_up_proj[e].split(inter)
            dn = m_layer.mlp.experts.down_proj[e]
            assert torch.equal(g[kept], gate[kept]) and torch.equal(u[kept], up[kept])
            assert torch.equal(dn[:, kept], down[:, kept])
            assert not torch.isclose(g[units], gate[units]).any()  # redrawn, not kept
            assert abs(float(g[units].std()) - float(gate.std())) < 0.5 * float(gate.std())
    ids = _ids()
    a, b = dense(ids).logits, moe(ids).logits
    difference = float((a - b).abs().max())
    assert 1e-4 < difference < 0.5 * float(a.abs().max())  # not the dense function, but near it


def test_the_saved_archive_loads_as_a_causal_lm(tmp_path):
    from paperworks.shared.backends.hf import HFBackend
    from transformers import AutoModelForCausalLM

    base = HFBackend.from_dir(save_llama(tmp_path / "llama"))
    moe, _ = upcycle_causal_lm(base.module, experts=4, top_k=2, drop_ratio=0.5, seed=1)
    with tarfile.open(fileobj=io.BytesIO(hf_model.save_archive(moe, base.tokenizer))) as tar:
        names = set(tar.getnames())
        tar.extractall(tmp_path / "moe", filter="data")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
    assert not any(n.endswith((".bin", ".pt")) for n in names)
    loaded, info = AutoModelForCausalLM.from_pretrained(tmp_path / "moe", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    ids = _ids(2, 16)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, moe(ids).logits, atol=1e-6, rtol=0)
    served = HFBackend.from_dir(tmp_path / "moe")  # the platform's hf backend: tokenizer and all
    assert type(served.module).__name__ == "MixtralForCausalLM" and served.encode("ab")


def test_families_and_parameters_it_cannot_upcycle_are_refused():
    with pytest.raises(ValueError, match="'gpt2' has no MoE counterpart"):
        moe_config(_dense("gpt2", n_embd=32, n_layer=1, n_head=4).config, 4, 2)
    with pytest.raises(ValueError, match="mlp_bias"):
        moe_config(_dense(mlp_bias=True).config, 4, 2)
    with pytest.raises(ValueError, match="top_k"):
        moe_config(_dense().config, 2, 3)
    with pytest.raises(ValidationError, match="set one of base"):
        UpcycleParams(base={"kind": "hf", "path": "/m"}, dense={"path": "/d.safetensors"})
    with pytest.raises(ValidationError, match="base.kind"):
        UpcycleParams(base={"kind": "tiny", "path": "/m"})
    assert UpcycleParams(base={"kind": "hf", "path": "/m"}).base.source.path == "/m"


def test_dpsl_shapes_the_routers_of_an_upcycled_llama_and_nothing_else(tmp_path):
    """Routers-only training on text (copy init: identical experts, so the LM loss is blind to the
    routing): DPSL with alpha = 0.25 moves each expert's routing distribution to the prior's Beta
    marginal (CvM) and makes routing confident, further than the LM loss alone, while the load
    stays balanced; only the router weights change."""
    from paperworks.services.moe import hf_train
    from paperworks.services.moe.dpsl.losses import RouterTerm
    from paperworks.shared.backends.hf import HFBackend
    from paperworks.shared.backends.tiny_data import stdlib_texts

    base = HFBackend.from_dir(save_llama(tmp_path / "llama"))
    ids = [i for t in stdlib_texts(max_files=6, max_chars=3000, seed=0) for i in base.encode(t)]
    windows = torch.tensor(ids[: len(ids) // 33 * 33]).reshape(-1, 33)
    train, test = windows[:-32], windows[-32:]
    prior = [0.25] * 4
    out = {}
    for name, terms in (("dpsl", [RouterTerm("dpsl", 1.0, [0.25])]), ("lm", [])):
        moe, _ = upcycle_causal_lm(base.module, experts=4, top_k=2, seed=0)
        frozen = {n: p.clone() for n, p in moe.named_parameters() if not n.endswith("mlp.gate.weight")}
        history = hf_train.fit_routers(moe, train, terms, steps=30, batch_size=8, learning_rate=1e-2, seed=0)
        assert all(torch.equal(p, frozen[n]) for n, p in moe.named_parameters() if n in frozen)
        assert len(history) == 30 and "confidence" in history[-1]
        out[name] = hf_train.evaluate(moe, test, prior)
    cvm = {k: sum(sum(layer["cvm"]) for layer in v["layers"]) for k, v in out.items()}
    assert cvm["dpsl"] < 0.5 * cvm["lm"], cvm  # 0.19 vs 0.78 (seed 0; 0.18-0.19 vs 0.76-0.78 on 0-2)
    assert out["dpsl"]["confidence"] > out["lm"]["confidence"] + 0.05
    assert out["dpsl"]["max_mean_load"] < 1.45  # near balance: 1.25-1.33 on seeds 0-2 (1 = even)
    with pytest.raises(ValueError, match="no selection bias"):
        hf_train.check_terms([RouterTerm("aux_free_bias")])
