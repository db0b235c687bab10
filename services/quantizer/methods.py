"""The quantization methods, one object per name of `method_names.NAMES`: the one place that says
how a method quantizes (its layer's initialization, what runs after it, what QAT trains, what
happens after QAT), how its layers pack for the kernel library, and how a packed layer is stored
in and rebuilt from a checkpoint (its `PackedFormat`). The pipelines (`quantize.py`) and the
checkpoint (`checkpoint.py`) ask this registry; nothing else switches on a method's name.

Methods: "rabit" (coupled residual binary paths, `rabit/`), "lcqat" (linear-constrained VQ,
`lcqat/`), and the baselines "independent" (two binary paths with their own latents, `rabit/`),
"scalar_qat" and "rtn" (`baselines.py`). Pure PyTorch: no platform imports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from . import lcqat, rabit
from .baselines import PackedInt2Linear, ScalarQATLinear
from .linears import find_linears, get_module, linear_weight
from .method_names import NAMES

if TYPE_CHECKING:
    from .quantize import Progress, QuantConfig


@dataclass(frozen=True)
class PackedFormat:
    """One packed layer type as the checkpoint stores it: its `format` name in the manifest, its
    (N, M) shape, the manifest fields beyond the common ones, and how it is rebuilt from its
    tensors and manifest entry."""

    name: str
    type: type[nn.Module]
    shape: Callable[[nn.Module], tuple[int, int]]
    load: Callable[[dict[str, torch.Tensor], dict], nn.Module]
    entry: Callable[[nn.Module], dict] = lambda m: {}


BINARY2 = PackedFormat("binary2", rabit.PackedBinaryLinear, lambda m: (m.g.shape[1], m.h.shape[1]),
                       lambda t, layer: rabit.PackedBinaryLinear.from_tensors(t))
LATTICE2 = PackedFormat("lattice2", lcqat.PackedLatticeLinear,
                        lambda m: (m.codes.shape[0], m.in_scale.shape[0]),
                        lambda t, layer: lcqat.PackedLatticeLinear.from_tensors(t))
INT2 = PackedFormat("int2", PackedInt2Linear, lambda m: (m.codes.shape[0], m.codes.shape[1] * 4),
                    lambda t, layer: PackedInt2Linear.from_tensors(t, layer["group_size"]),
                    entry=lambda m: {"group_size": m.group_size})


class Method:
    """A quantization method: `layer_type` is its fake-quantized (trainable) layer, `format` the
    packed form of that layer; `trains` is False for a method with no QAT. `splits_experts`: a
    method whose layer init needs no calibration inputs also quantizes a MoE's fused experts, one
    layer per expert (`experts.py`); one that calibrates per layer (RaBiT's channel importance,
    LC-QAT's Hessians) leaves them float, since calibration may route no token to an expert; the
    accounting (`coverage.py`) reports them either way."""

    name: str
    layer_type: type[nn.Module]
    format: PackedFormat
    trains = True
    splits_experts = False

    def check(self, module: nn.Module) -> None:
        """ValueError when the model's layers cannot take this method."""

    def layer(self, w: torch.Tensor, bias, x: torch.Tensor, index: int, cfg: QuantConfig) -> nn.Module:
        """The step-0 quantized layer for weight `w` (N, M), given its calibration inputs `x`."""
        raise NotImplementedError

    def refine(self, student: nn.Module, teacher: nn.Module, calib: torch.Tensor, cfg: QuantConfig,
               progress: Progress) -> dict:
        """What runs on the whole student after every layer's init; returns what it measured."""
        return {}

    def qat_params(self, layer: nn.Module) -> list[nn.Parameter]:
        """The parameters QAT trains in one of this method's layers."""
        raise NotImplementedError

    def after_training(self, layer: nn.Module) -> None:
        """What a layer does once QAT is over."""

    def pack(self, layer: nn.Module) -> nn.Module:
        """The packed (kernel-library) form of one of this method's layers."""
        return layer.packed()

    def side_bits(self, n: int, m: int, group_size: int = 64) -> dict[str, int]:
        """Bits of the stored tensors beside the 2-bit codes of one (N, M) layer, by tensor (scales,
        the float g / h vectors, codebooks, rotation signs; the bias is not counted)."""
        raise NotImplementedError


class TwoPaths(Method):
    """RaBiT's coupled paths, or (`coupled` False) the independent-latent baseline; both start from
    the same step-0 weights."""

    format = BINARY2

    def __init__(self, name: str, coupled: bool):
        self.name, self.coupled = name, coupled
        self.layer_type = rabit.RaBiTLinear if coupled else rabit.IndependentBinaryLinear

    def layer(self, w, bias, x, index, cfg):
        return rabit.make_layer(w, bias, x, coupled=self.coupled, init=cfg.init, sweeps=cfg.init_sweeps)

    def qat_params(self, layer):
        return [layer.weight if self.coupled else layer.latent, layer.g, layer.h]

    def pack(self, layer):
        return rabit.PackedBinaryLinear.from_layer(layer)

    def side_bits(self, n, m, group_size=64):
        return {"g": 2 * n * 32, "h": 2 * m * 32}  # float32 (2, N) and (2, M)


class LCQAT(Method):
    name, layer_type, format = "lcqat", lcqat.LCLinear, LATTICE2

    def check(self, module):
        for name in find_linears(module):
            m = linear_weight(get_module(module, name))[0].shape[1]
            if m % 4:
                raise ValueError(f"lcqat needs in_features divisible by 4; {name} has {m}")

    def layer(self, w, bias, x, index, cfg):
        layer = lcqat.LCLinear(w, bias, cfg.seed * 1000 + 2 * index)
        layer.ptq(x)
        return layer

    def refine(self, student, teacher, calib, cfg, progress):
        info = {}
        if cfg.block_steps > 0:
            info["block_reconstruction_error"] = lcqat.block_reconstruction(
                student, teacher, calib, steps=cfg.block_steps, latent_lr=cfg.block_latent_lr,
                on_block=lambda i, n, e: progress(i, n, "block_reconstruction",
                                                  f"block {i}: rel. MSE {e:.4f}"))
        if cfg.e2e_steps > 0:
            info["end_to_end_losses"] = lcqat.end_to_end(
                student, teacher, calib, steps=cfg.e2e_steps, latent_lr=cfg.e2e_latent_lr,
                hidden_weight=cfg.hidden_weight,
                on_step=lambda i, n, loss: progress(i, n, "end_to_end", f"step {i}: loss {loss:.4f}"))
        return info

    def qat_params(self, layer):
        if layer.mode != "qat":
            layer.start_qat()  # QAT trains the continuous latent, starting at the PTQ codes
        return [layer.latent, layer.a, layer.b, layer.scale, layer.in_scale]

    def after_training(self, layer):
        if layer.mode == "qat":
            layer.finish_qat()

    def side_bits(self, n, m, group_size=64):
        # float32 row scale s (N), input scale c (M), A (4x4) and b (4); the Hadamards' random signs
        # are stored as one uint8 each (they could be regenerated from the seed; counted as stored)
        return {"scale": n * 32, "in_scale": m * 32, "a": 16 * 32, "b": 4 * 32, "in_signs": m * 8,
                "out_signs": n * 8}


class Scalar(Method):
    """The scalar 2-bit baselines: QAT with learned group scale and offset, or (`trains` False)
    round-to-nearest alone."""

    layer_type, format = ScalarQATLinear, INT2
    splits_experts = True  # min-max RTN init, no calibration inputs

    def __init__(self, name: str, trains: bool):
        self.name, self.trains = name, trains

    def layer(self, w, bias, x, index, cfg):
        return ScalarQATLinear(w, bias, cfg.group_size)

    def qat_params(self, layer):
        return [layer.weight, layer.log_gain, layer.offset]

    def side_bits(self, n, m, group_size=64):
        groups = m // (group_size if m % group_size == 0 else m)  # as ScalarQATLinear groups
        return {"scale": n * groups * 32, "offset": n * groups * 32}  # float32 per group and row


METHODS: dict[str, Method] = {m.name: m for m in (
    TwoPaths("rabit", coupled=True), LCQAT(), TwoPaths("independent", coupled=False),
    Scalar("scalar_qat", trains=True), Scalar("rtn", trains=False))}
if tuple(METHODS) != NAMES:
    raise ImportError(f"methods {tuple(METHODS)} do not match method_names.NAMES {NAMES}")
FORMATS: dict[str, PackedFormat] = {m.format.name: m.format for m in METHODS.values()}


def bits_per_weight(method: str, shapes: list[tuple[int, int]], group_size: int = 64) -> dict:
    """Stored bits per quantized weight of `method` over layers of these (N, M) shapes: the 2-bit
    codes alone, and with every tensor beside them (`side_bits`: scales, g / h, codebooks, signs),
    also per tensor. What a packed checkpoint holds (`checkpoint.bits_per_weight` counts it)."""
    weights = sum(n * m for n, m in shapes)
    parts: dict[str, int] = {}
    for n, m in shapes:
        for k, v in get(method).side_bits(n, m, group_size).items():
            parts[k] = parts.get(k, 0) + v
    side = sum(parts.values())
    return {"codes": 2.0, "with_scales": (2 * weights + side) / weights,
            "parts": {k: v / weights for k, v in parts.items()}}


def get(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(NAMES)}") from None


def of_layer(module: nn.Module) -> Method | None:
    """The method whose quantized layer `module` is (None for any other module)."""
    return next((m for m in METHODS.values() if type(module) is m.layer_type), None)


def format_of(module: nn.Module) -> PackedFormat | None:
    """The packed format `module` is stored in (None for any other module)."""
    return next((f for f in FORMATS.values() if type(module) is f.type), None)
