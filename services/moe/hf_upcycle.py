"""Sparse upcycling of a dense Hugging Face causal LM into the transformers MoE class of its family.

Every decoder layer's gated MLP `down(act(gate x) * up x)` becomes E experts of the same shape and
a new router (`mlp.gate.weight`, normal with the dense config's `initializer_range`); everything
else (embeddings, attention, norms, head) is copied. Each token goes to its top-k experts weighted
by the router's softmax renormalised over the k chosen, so with `drop_ratio` 0 (every expert a
copy) the MoE computes exactly the dense function (Komatsuzaki et al., arXiv 2212.05055).
Drop-Upcycling (Nakamura et al., arXiv 2502.19261) re-initialises, per expert, a random share r of
the intermediate neurons: their rows of W_gate and W_up and their columns of W_down, drawn from a
normal with each original matrix's mean and standard deviation.

The families (`FAMILIES`): llama and mistral -> mixtral; qwen2 -> qwen2_moe (no shared expert,
top-k renormalised); qwen3 -> qwen3_moe (top-k renormalised). In this transformers the experts are
fused 3-D parameters, `experts.gate_up_proj` (E, 2I, H; gate rows first) and `experts.down_proj`
(E, H, I), not per-expert nn.Linear; save_pretrained writes the hub's per-expert layout. Pure
PyTorch and transformers (imported when used: the service's edge checks families without it); no
platform imports.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import torch
from paperworks.shared.threads import TRANSFORMERS_LOCK

# dense model_type -> (MoE model_type, the MoE config's fields that make it an exact upcycle);
# "{E}", "{K}", "{I}" are the experts, top-k and the dense intermediate size
_MIXTRAL = {"num_local_experts": "{E}", "num_experts_per_tok": "{K}", "router_jitter_noise": 0.0}
FAMILIES: dict[str, tuple[str, dict]] = {
    "llama": ("mixtral", _MIXTRAL),
    "mistral": ("mixtral", _MIXTRAL),
    "qwen2": ("qwen2_moe", {
        "num_experts": "{E}", "num_experts_per_tok": "{K}", "moe_intermediate_size": "{I}",
        "norm_topk_prob": True, "shared_expert_intermediate_size": 0, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "qkv_bias": True,
    }),
    "qwen3": ("qwen3_moe", {
        "num_experts": "{E}", "num_experts_per_tok": "{K}", "moe_intermediate_size": "{I}",
        "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
    }),
}  # fmt: skip
_NOT_CARRIED = ("architectures", "model_type", "transformers_version", "_name_or_path", "dtype")


@dataclass
class UpcycleReport:
    """What the upcycle did, per layer: the neurons Drop-Upcycling re-initialised in each expert."""

    dense_type: str
    moe_type: str
    experts: int
    top_k: int
    intermediate_size: int
    dropped: list[list[list[int]]]  # [layer][expert] -> re-initialised neuron indices


def moe_type_of(dense_type: str) -> str:
    """The MoE model_type a dense family upcycles to; ValueError for a family with no mapping."""
    if dense_type not in FAMILIES:
        raise ValueError(
            f"model_type {dense_type!r} has no MoE counterpart here (upcycled: "
            + ", ".join(f"{d} -> {m}" for d, (m, _) in FAMILIES.items())
            + ")"
        )
    return FAMILIES[dense_type][0]


def _check_dense(config) -> None:
    if getattr(config, "mlp_bias", False):
        raise ValueError("the MLP has biases (mlp_bias); the MoE experts have none")
    if config.model_type in ("llama", "mistral") and getattr(config, "attention_bias", False):
        raise ValueError("attention_bias: Mixtral's attention has no biases")


def moe_config(dense_config, experts: int, top_k: int):
    """The MoE family's config: the dense config's shared fields, the experts' fields from FAMILIES."""
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    moe_type = moe_type_of(dense_config.model_type)
    if not 1 <= top_k <= experts:
        raise ValueError(f"top_k must be in 1..{experts}")
    _check_dense(dense_config)
    target = CONFIG_MAPPING[moe_type]
    fields = {f.name for f in dataclasses.fields(target)} if dataclasses.is_dataclass(target) else None
    dense = {k: v for k, v in dense_config.to_dict().items() if k not in _NOT_CARRIED}
    carried = {k: v for k, v in dense.items() if fields is None or k in fields}
    sizes = {"{E}": experts, "{K}": top_k, "{I}": dense_config.intermediate_size}
    extra = {
        k: sizes.get(v, v) if isinstance(v, str) else v
        for k, v in FAMILIES[dense_config.model_type][1].items()
    }
    head_dim = (
        getattr(dense_config, "head_dim", None)
        or dense_config.hidden_size // dense_config.num_attention_heads
    )
    config = target(**(carried | extra | {"head_dim": head_dim, "output_router_logits": False}))
    config.architectures = [AutoModelForCausalLM._model_mapping[target].__name__]
    return config


def _redrawn(weight: torch.Tensor, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Fresh values from N(mean, std) of `weight` (Drop-Upcycling's re-initialisation statistics)."""
    w = weight.float()
    return torch.normal(float(w.mean()), float(w.std()), shape, generator=gen).to(weight.dtype)


@torch.no_grad()
def upcycle_causal_lm(
    dense: torch.nn.Module, experts: int, top_k: int, drop_ratio: float = 0.0, seed: int = 0
) -> tuple[torch.nn.Module, UpcycleReport]:
    """(the MoE causal LM, what was done) for a dense transformers causal LM of a FAMILIES family."""
    if not 0.0 <= drop_ratio <= 1.0:
        raise ValueError("drop_ratio must be in [0, 1]")
    from transformers import AutoModelForCausalLM

    config = moe_config(dense.config, experts, top_k)
    dtype = next(dense.parameters()).dtype
    gen = torch.Generator().manual_seed(seed)
    with TRANSFORMERS_LOCK, torch.device("cpu"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Initializing zero-element tensors")  # qwen2_moe's shared expert
        moe = AutoModelForCausalLM.from_config(config, dtype=dtype)
    state = {k: v for k, v in dense.state_dict().items() if ".mlp." not in k}
    missing, unexpected = moe.load_state_dict(state, strict=False)
    not_mlp = [
        k for k in missing if ".mlp." not in k and not (k == "lm_head.weight" and config.tie_word_embeddings)
    ]
    if unexpected or not_mlp:
        raise ValueError(
            f"the MoE does not take the dense weights: missing {not_mlp}, unexpected {unexpected}"
        )
    if config.tie_word_embeddings:
        moe.tie_weights()
    std = float(getattr(dense.config, "initializer_range", 0.02))
    dropped = []
    for d_layer, m_layer in zip(dense.model.layers, moe.model.layers, strict=True):
        mlp, block = d_layer.mlp, m_layer.mlp
        gate, up, down = (p.weight.detach().cpu() for p in (mlp.gate_proj, mlp.up_proj, mlp.down_proj))
        inter = gate.shape[0]
        block.gate.weight.copy_(torch.normal(0.0, std, tuple(block.gate.weight.shape), generator=gen))
        layer_dropped = []
        for e in range(experts):
            g, u, dn = gate.clone(), up.clone(), down.clone()
            units = (
                torch.randperm(inter, generator=gen)[: round(drop_ratio * inter)] if drop_ratio > 0 else None
            )
            if units is not None and len(units):
                g[units] = _redrawn(gate, (len(units), g.shape[1]), gen)
                u[units] = _redrawn(up, (len(units), u.shape[1]), gen)
                dn[:, units] = _redrawn(down, (dn.shape[0], len(units)), gen)
            block.experts.gate_up_proj[e].copy_(torch.cat([g, u], 0))
            block.experts.down_proj[e].copy_(dn)
            layer_dropped.append(sorted(units.tolist()) if units is not None else [])
        dropped.append(layer_dropped)
        shared = getattr(block, "shared_expert", None)
        if shared is not None:  # qwen2_moe: a zero-width shared expert and a zero gate add nothing
            for p in (*shared.parameters(), block.shared_expert_gate.weight):
                p.zero_()
    moe.generation_config = dense.generation_config
    report = UpcycleReport(dense.config.model_type, config.model_type, experts, top_k, inter, dropped)
    return moe.to(next(dense.parameters()).device).eval(), report
