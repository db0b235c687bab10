"""The scalar 2-bit baselines LC-QAT is measured against (arXiv 2606.10531, Sec. 4): per-group
round-to-nearest (RTN) and scalar 2-bit QAT with learned group scale and offset.

    W_q = s_g * clamp(round((W - o_g) / s_g), 0, 3) + o_g      for each group g of G columns,

the latent W and (s, o) trained with the straight-through estimator; at step 0 it is min-max
RTN (`packing.quantize_int2`). Inference runs on the kernel library's `int2_linear`.

Design choices (not from the paper). With the clamp inside the straight-through estimator and
the scale learned directly, this baseline diverged at the benchmark's 600 steps (dim-128 model,
500-step teacher, lr 3e-4: val loss from RTN 1.75 down to 1.69 at step 100, then up to 2.72):
latent weights drifted out of the 4 levels (31% of them by the end) and the smallest group
scales (~0.015) crossed zero under Adam's absolute steps, flipping their groups. Each change
below alone kept it improving (1.673 at step 400); both are kept:
- the straight-through estimator passes `round` only and the clamp keeps its true gradient (the
  LSQ+ gradients): a latent weight outside the 4 levels stops drifting, and the offset learns
  from the clamped weights (with the clamp inside the straight-through its gradient is zero);
- the scale is learned as a log-gain on its RTN value, s = s_0 exp(l) with l = 0 at step 0: it
  stays positive and Adam's steps are relative to it.
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
        self.register_buffer("rtn_scale", scale.clamp_min(1e-8))
        self.log_gain = nn.Parameter(torch.zeros_like(scale))
        self.offset = nn.Parameter(offset)
        self.register_buffer("bias", None if bias is None else bias.float())

    @property
    def scale(self) -> torch.Tensor:
        """The per-group scale s_0 exp(l): positive, exactly the RTN scale at step 0."""
        return self.rtn_scale * self.log_gain.exp()

    def _grouped(self) -> torch.Tensor:
        """u = (W - o) / s per group, shaped (N, groups, G): the codes before rounding."""
        n, m = self.weight.shape
        return (self.weight.reshape(n, -1, self.group_size) - self.offset[..., None]) / self.scale[..., None]

    def quantized_weight(self) -> torch.Tensor:
        u = self._grouped()
        q = (u + (torch.round(u) - u).detach()).clamp(0, 3)  # straight-through round, true clamp
        return (q * self.scale[..., None] + self.offset[..., None]).reshape(self.weight.shape)

    def forward(self, x):
        return F.linear(x, self.quantized_weight().to(x.dtype), self.bias)

    @torch.no_grad()
    def packed(self) -> PackedInt2Linear:
        q = torch.round(self._grouped()).clamp(0, 3)
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
