"""A generated adapter in PEFT LoRA format (§4.4 serving): for each adapted projection,
lora_B ← L + Ĝ (d_out × r), lora_A ← Rᵀ (r × d_in), lora_alpha = r so the scaling is 1, exactly
W = Ŵ + (L + Ĝ) Rᵀ. The files (adapter_config.json, adapter_model.safetensors) load with
`peft.PeftModel.from_pretrained` onto the same base model, so any PEFT-capable server serves them.
"""

from __future__ import annotations

import json

import torch
from safetensors.torch import save as st_save

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


def peft_files(
    factors: dict[str, tuple[torch.Tensor, torch.Tensor]],
    targets,
    rank: int,
    base_model: str = "",
    metadata: dict | None = None,
) -> dict[str, bytes]:
    """{module name: (left = L + Ĝ (d_out, r), right = R (d_in, r))} -> the two PEFT files' bytes.
    Module names are those of the base model (e.g. model.layers.0.self_attn.q_proj)."""
    tensors = {}
    for name, (left, right) in factors.items():
        prefix = f"base_model.model.{name}"
        tensors[f"{prefix}.lora_A.weight"] = right.detach().float().cpu().T.contiguous()
        tensors[f"{prefix}.lora_B.weight"] = left.detach().float().cpu().contiguous()
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": rank,
        "lora_dropout": 0.0,
        "target_modules": sorted(set(targets)),
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "init_lora_weights": True,
        "inference_mode": True,
    }
    meta = {"format": "pt"} | {k: str(v) for k, v in (metadata or {}).items()}
    return {CONFIG_FILE: json.dumps(config, indent=1).encode(), WEIGHTS_FILE: st_save(tensors, metadata=meta)}


def graph_adapter(
    model, condition: dict[str, torch.Tensor], graph: int = 0
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{module: (L + Ĝ_graph, R)} from a GaRAModel's static factors and one graph's conditioning;
    for the static arm (condition None) just (L, R)."""
    out = {}
    for name, (left, right) in model.static_factors().items():
        if condition is not None:
            left = left + condition[name][graph].detach()
        out[name] = (left, right)
    return out
