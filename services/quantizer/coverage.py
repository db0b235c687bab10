"""How much of a model's blocks a quantization covers, counted over every weight matrix in the
transformer blocks, quantized or not. Pure PyTorch.

Per-layer bits per weight (`checkpoint.bits_per_weight`) count only the layers a method packed. On
a model whose blocks hold weights that are not linear layers (a transformers MoE's fused 3-D
experts when the method cannot split them, its routers), that number alone would say "2 bits"
of a model that is mostly float32. Here the denominator is every weight matrix (parameters of 2 or
more dimensions) inside the block list: `quantized_fraction` is the packed share, `float_weights`
names what stayed float by kind ("experts (fused, 3-D)", "routers", else the module type and
tensor), and `bits_per_block_weight` is every stored bit of those weights (codes, scales and the
float tensors) over all of them. Vectors (norms, biases) are not weights here, as in the per-layer
count; embeddings and the output head lie outside the blocks and stay float by design in both
papers.
"""

from __future__ import annotations

from torch import nn

from .linears import SKIP, find_block_list, get_module, is_linear, linear_weight
from .methods import format_of

EXPERTS, ROUTERS = "experts (fused, 3-D)", "routers"


def _in_blocks(model: nn.Module):
    """A predicate on parameter names: inside the block list (no list: not an embedding or head)."""
    found = find_block_list(model)
    if found is not None:
        prefix = f"{found[0]}."
        return lambda name: name.startswith(prefix)
    return lambda name: not any(s in name for s in SKIP)


def kind_of(model: nn.Module, name: str, dim: int) -> str:
    """What a float weight tensor of the blocks is, for the report."""
    owner_name, _, leaf = name.rpartition(".")
    owner = get_module(model, owner_name) if owner_name else model
    if dim == 3:
        return EXPERTS
    cls = type(owner).__name__
    if "Router" in cls or (owner_name.rpartition(".")[2] == "gate" and not is_linear(owner)):
        return ROUTERS
    return f"{cls}.{leaf}"


def _account(model: nn.Module, quantized: dict[str, tuple[int, int | None]]) -> dict:
    """`quantized`: module name -> (weights, stored bits or None when not yet packed)."""
    inside = _in_blocks(model)
    total_q = sum(w for w, _ in quantized.values())
    q_bits = None if any(b is None for _, b in quantized.values()) else sum(b for _, b in quantized.values())
    prefixes = tuple(f"{n}." for n in quantized)
    floats: dict[str, dict] = {}
    float_bits = 0
    for name, t in model.named_parameters():
        if t.dim() < 2 or not t.numel() or not inside(name) or name.startswith(prefixes):
            continue
        entry = floats.setdefault(kind_of(model, name, t.dim()),
                                  {"weights": 0, "tensors": 0, "dtypes": set()})
        entry["weights"] += t.numel()
        entry["tensors"] += 1
        entry["dtypes"].add(str(t.dtype).removeprefix("torch."))
        float_bits += t.numel() * t.element_size() * 8
    total = total_q + sum(e["weights"] for e in floats.values())
    out = {"block_weights": total, "quantized_weights": total_q,
           "quantized_fraction": total_q / max(total, 1),
           "float_weights": {k: {"weights": e["weights"], "tensors": e["tensors"],
                                 "fraction": e["weights"] / max(total, 1),
                                 "dtype": "/".join(sorted(e["dtypes"]))}
                             for k, e in sorted(floats.items(), key=lambda kv: -kv[1]["weights"])}}
    if q_bits is not None:
        out["bits_per_block_weight"] = (q_bits + float_bits) / max(total, 1)
    return out


def plan(model: nn.Module, names: list[str]) -> dict:
    """The coverage of quantizing the named linear layers of a (float) model, before it happens."""
    shapes = {n: linear_weight(get_module(model, n))[0].shape for n in names}
    return _account(model, {n: (s[0] * s[1], None) for n, s in shapes.items()})


def of_packed(packed: nn.Module) -> dict:
    """The coverage of a packed model, with `bits_per_block_weight`: the packed layers' codes and
    side tensors (not their bias) plus every float weight of the blocks, over all of them."""
    quantized = {}
    for name, m in packed.named_modules():
        fmt = format_of(m)
        if fmt is not None:
            n, m_in = fmt.shape(m)
            bits = sum(t.numel() * t.element_size() * 8 for k, t in m.tensors().items() if k != "bias")
            quantized[name] = (n * m_in, bits)
    return _account(packed, quantized)


def describe(cov: dict) -> str:
    """One line for progress messages, announcements and the manifest's warning."""
    line = f"{cov['quantized_fraction']:.1%} of the blocks' {cov['block_weights']:,} weights quantized"
    if cov["float_weights"]:
        line += "; float: " + ", ".join(f"{k} {e['fraction']:.1%} ({e['dtype']})"
                                        for k, e in cov["float_weights"].items())
    if "bits_per_block_weight" in cov:
        line += f"; {cov['bits_per_block_weight']:.3g} bits per block weight, all stored bits counted"
    return line
