"""The quantized checkpoint: one safetensors file plus a small JSON manifest.

The safetensors file holds `q.<layer>.<tensor>` for every packed 2-bit layer (sign bits or 2-bit
codes as uint8, their float32 scales) and `fp.<name>` for every other tensor of the model in
full precision (embeddings, norms, output head). The manifest (also embedded in the file's
metadata) names the format, the method, the base model and, per layer, its packed format,
shape and stored bits per weight: code bits alone and with the float side tensors; and the
coverage over every weight matrix of the blocks (`coverage.py`: the quantized fraction, what
stayed float, bits per block weight, a `warning` when not all of it is quantized). A MoE whose
fused experts were split into one packed layer per expert lists those modules
(`unfused_experts`). Loading rebuilds the packed layers on a fresh copy of the base model (its
listed experts split first); nothing is unpickled. The packed
formats (binary2, lattice2, int2) are declared in `methods.py`, beside the methods that make them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import nn

from . import coverage, experts
from .linears import device_of, set_module
from .methods import FORMATS, format_of

FORMAT = "paperworks-quantized/1"
CODE_TENSORS = ("signs", "codes")


def packed_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(n, m) for n, m in model.named_modules() if format_of(m) is not None]


def _bits(t: torch.Tensor) -> int:
    return t.numel() * t.element_size() * 8


def bits_per_weight(packed: nn.Module) -> dict:
    """Stored bits per quantized weight of a packed model, counted from its tensors: the codes
    alone (`codes`), with every tensor stored beside them (`with_scales`: scales, RaBiT's float
    g / h vectors, LC-QAT's A, b and rotation signs; not the bias), and per tensor (`parts`)."""
    code_bits = weights = 0
    parts: dict[str, int] = {}
    for _, m in packed_layers(packed):
        n, m_in = format_of(m).shape(m)
        weights += n * m_in
        for k, t in m.tensors().items():
            if k in CODE_TENSORS:
                code_bits += _bits(t)
            elif k != "bias":
                parts[k] = parts.get(k, 0) + _bits(t)
    w = max(weights, 1)
    return {"codes": code_bits / w, "with_scales": (code_bits + sum(parts.values())) / w,
            "parts": {k: v / w for k, v in parts.items()}, "weights": weights}


def save(packed: nn.Module, method: str, base: dict) -> tuple[bytes, dict]:
    """(safetensors bytes, manifest) of a packed model."""
    tensors: dict[str, torch.Tensor] = {}
    layers, inside = [], set()
    code_bits = side_bits = weights = 0
    for name, m in packed_layers(packed):
        fmt = format_of(m)
        parts = m.tensors()
        tensors.update({f"q.{name}.{k}": t.detach().cpu().contiguous() for k, t in parts.items()})
        n, m_in = fmt.shape(m)
        cb = sum(_bits(t) for k, t in parts.items() if k in CODE_TENSORS)
        sb = sum(_bits(t) for k, t in parts.items() if k not in (*CODE_TENSORS, "bias"))
        entry = {"name": name, "format": fmt.name, "shape": [n, m_in],
                 "bits_per_weight": cb / (n * m_in), "bits_per_weight_with_scales": (cb + sb) / (n * m_in),
                 **fmt.entry(m)}
        layers.append(entry)
        code_bits, side_bits, weights = code_bits + cb, side_bits + sb, weights + n * m_in
        inside.update(f"{name}.{k}" for k in m.state_dict())
    for key, t in packed.state_dict().items():
        if key not in inside:
            tensors[f"fp.{key}"] = t.detach().cpu().contiguous().clone()  # clone: tied weights stay apart
    cov = coverage.of_packed(packed)
    manifest = {"format": FORMAT, "method": method, "base_model": base, "layers": layers,
                "quantized_weights": weights, "bits_per_weight": code_bits / max(weights, 1),
                "bits_per_weight_with_scales": (code_bits + side_bits) / max(weights, 1),
                "unfused_experts": experts.unfused_names(packed), "coverage": cov,
                "bits_per_block_weight": cov["bits_per_block_weight"],
                "quantized_fraction": cov["quantized_fraction"]}
    if cov["float_weights"]:
        manifest["warning"] = (f"bits_per_weight counts the packed layers only; {coverage.describe(cov)}")
    return st_save(tensors, metadata={"manifest": json.dumps(manifest)}), manifest


def manifest_of(path: Path) -> dict:
    """The manifest embedded in a checkpoint file's safetensors metadata (no tensors read)."""
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata() or {}
    if "manifest" not in metadata:
        raise ValueError(f"{path.name} carries no paperworks manifest")
    return json.loads(metadata["manifest"])


def load(data: bytes, manifest: dict, base_module: nn.Module) -> nn.Module:
    """Rebuild the packed model on `base_module` (a fresh full-precision copy of the base), on the
    device the base module is on."""
    if manifest.get("format") != FORMAT:
        raise ValueError(f"manifest format {manifest.get('format')!r} is not {FORMAT!r}")
    tensors = st_load(data)
    device = device_of(base_module)
    model = base_module.float()
    experts.unfuse(model, manifest.get("unfused_experts", []))
    for layer in manifest["layers"]:
        name = layer["name"]
        prefix = f"q.{name}."
        t = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        if layer["format"] not in FORMATS:
            raise ValueError(f"layer {name} has format {layer['format']!r}; known: {', '.join(FORMATS)}")
        set_module(model, name, FORMATS[layer["format"]].load(t, layer))
    fp = {k[3:]: v for k, v in tensors.items() if k.startswith("fp.")}
    result = model.load_state_dict(fp, strict=False)
    if result.unexpected_keys:
        raise ValueError(f"checkpoint has tensors the base model lacks: {result.unexpected_keys[:5]}")
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(device).eval()
