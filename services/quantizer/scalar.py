"""The scalar 2-bit baselines LC-QAT is measured against (arXiv 2606.10531, Sec. 4): per-group
round-to-nearest (RTN) and scalar 2-bit QAT with learned group scale and offset.

    W_q = s_g * clamp(round((W - o_g) / s_g), 0, 3) + o_g      for each group g of G columns,

the latent W and (s, o) trained with the straight-through estimator; at step 0 it is min-max
RTN (`packing.quantize_int2`). Inference runs on the kernel library's `int2_linear`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from paperworks.kernels import ops, packing
from torch import nn


class ScalarQATLinear(nn.Module):
    def __init__(self, w: torch.Tensor, bias, group_size: int):
        super().__init__()
        n, m = w.shape
        self.group_size = group_size if m % group_size == 0 else m
        if self.group_size % 4:
            raise ValueError(f"scalar 2-bit layers need in_features divisible by 4, got {m}")
        _, scale, offset = packing.quantize_int2(w, self.group_size)
        self.weight = nn.Parameter(w.clone())
        self.scale = nn.Parameter(scale.clamp_min(1e-8))
        self.offset = nn.Parameter(offset)
        self.register_buffer("bias", None if bias is None else bias.float())

    def _grouped(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(u, rounded codes) with u = (W - o) / s per group, shaped (N, groups, G)."""
        n, m = self.weight.shape
        u = (self.weight.reshape(n, -1, self.group_size) - self.offset[..., None]) / self.scale[..., None]
        return u, torch.round(u).clamp(0, 3)

    def quantized_weight(self) -> torch.Tensor:
        u, q = self._grouped()
        q = u + (q - u).detach()  # straight-through
        return (q * self.scale[..., None] + self.offset[..., None]).reshape(self.weight.shape)

    def forward(self, x):
        return F.linear(x, self.quantized_weight().to(x.dtype), self.bias)

    @torch.no_grad()
    def packed(self) -> PackedInt2Linear:
        _, q = self._grouped()
        codes = packing.pack_int2(q.reshape(self.weight.shape).to(torch.uint8))
        return PackedInt2Linear(codes, self.scale.detach(), self.offset.detach(), self.bias,
                                self.group_size)


class PackedInt2Linear(nn.Module):
    """Inference: 2-bit codes (N, M/4) with per-group scale and offset on `ops.int2_linear`."""

    def __init__(self, codes, scale, offset, bias, group_size: int):
        super().__init__()
        self.register_buffer("codes", codes.contiguous())
        self.register_buffer("scale", scale.float().contiguous())
        self.register_buffer("offset", offset.float().contiguous())
        self.register_buffer("bias", None if bias is None else bias.float())
        self.group_size = group_size

    @classmethod
    def from_tensors(cls, t: dict[str, torch.Tensor], group_size: int) -> PackedInt2Linear:
        return cls(t["codes"], t["scale"], t["offset"], t.get("bias"), group_size)

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {"codes": self.codes, "scale": self.scale, "offset": self.offset}
        return out if self.bias is None else {**out, "bias": self.bias}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.int2_linear(x, self.codes, self.scale, self.offset, group_size=self.group_size,
                               bias=self.bias)
