"""WNE's wrapper (eq. 1), the volume denoiser built on it, its training and its measures.

f(y) = std(y) · g(T(y)) + mean(y),  T(y) = (y − mean(y)) / std(y)                 (eq. 1)

with the statistics pooled over all channels and pixels of one sample and the population std.
For a > 0 and any b, T(ay + b) = T(y), so f(ay + b) = a f(y) + b exactly in exact arithmetic,
whatever the backbone g; the float32 defect is rounding only. Constant inputs (std < `EPS`)
are guarded: f(y) = y, itself equivariant.

- `wrapper="wne"`: eq. 1; `"input_norm"`: the ablation f(y) = g(T(y)) (the backbone is trained
  to output the clean image in input units; not equivariant); `"none"`: the bare backbone.
- Backbones (`backbones.py`): `DnCNN` and `WindowAttention`, by name in `BACKBONES`.
- `ne_defect(f, y, a, b) = ‖f(ay + b) − (a f(y) + b)‖ / ‖a f(y) + b‖`, for any model.

*Design choices:* 2-D backbones; a volume is denoised slice by slice along its first axis,
with the WNE statistics pooled over the whole volume (so the wrapped volume map is exactly
equivariant too). Training images get a random intensity gain in [0.25, 4] and offset in
[-0.5, 0.5] (scanner windows differ); the noise sigma is fixed in absolute units, so in
normalized units the wrapped model sees a range of noise levels.

*Device:* `train_denoiser(..., device=)` trains there; `denoise_volume` runs on the model's
device. Float32 only, never bf16 autocast: the wrapper's point is f(ay + b) = a f(y) + b to float32
rounding (NE defect ~1e-7), and bf16's 8-bit mantissa would make the defect ~1e-2, the size of the
bare backbone's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from paperworks.services.segmenter.wne.backbones import BACKBONES
from torch import nn

EPS = 1e-6


def stats(y: torch.Tensor, dims) -> tuple[torch.Tensor, torch.Tensor]:
    mean = y.mean(dim=dims, keepdim=True)
    std = y.std(dim=dims, keepdim=True, unbiased=False)
    return mean, std


class Wrapped(nn.Module):
    """f around a backbone g; inputs (B, 1, H, W), statistics per sample."""

    def __init__(self, backbone: nn.Module, wrapper: str = "wne"):
        super().__init__()
        if wrapper not in ("wne", "input_norm", "none"):
            raise ValueError(f"unknown wrapper {wrapper!r}")
        self.g, self.wrapper = backbone, wrapper

    def forward(self, y, mean=None, std=None):
        if self.wrapper == "none":
            return self.g(y)
        if mean is None:
            mean, std = stats(y, tuple(range(1, y.dim())))
        flat = std < EPS
        s = torch.where(flat, torch.ones_like(std), std)
        z = self.g((y - mean) / s)
        if self.wrapper == "input_norm":
            return z
        return torch.where(flat, y, s * z + mean)


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def denoise_volume(model: Wrapped, volume: np.ndarray, batch: int = 16) -> np.ndarray:
    """Slice-wise along axis 0 (2-D input: one slice); WNE statistics over the whole volume. Runs
    on the model's device; the result is a CPU array."""
    v = torch.from_numpy(np.asarray(volume, np.float32)).to(model_device(model))
    v3 = v[None] if v.dim() == 2 else v
    mean, std = stats(v3, (0, 1, 2))
    out = []
    for i in range(0, v3.shape[0], batch):
        x = v3[i : i + batch, None]
        if model.wrapper == "none":
            out.append(model(x)[:, 0])
        else:
            out.append(model(x, mean.expand(x.shape[0], 1, 1, 1), std.expand(x.shape[0], 1, 1, 1))[:, 0])
    res = torch.cat(out)
    return (res[0] if v.dim() == 2 else res).cpu().numpy()


@torch.no_grad()
def ne_defect(f: Callable[[torch.Tensor], torch.Tensor], y: torch.Tensor, a: float, b: float) -> float:
    target = a * f(y) + b
    return float((f(a * y + b) - target).norm() / target.norm().clamp_min(1e-30))


def psnr(x: np.ndarray, ref: np.ndarray, peak: float = 1.0) -> float:
    mse = float(np.mean((np.asarray(x, np.float64) - ref) ** 2))
    return float(10 * np.log10(peak**2 / max(mse, 1e-20)))


def train_denoiser(
    clean: np.ndarray,
    sigma: float,
    backbone: str = "dncnn",
    wrapper: str = "wne",
    steps: int = 300,
    batch: int = 16,
    lr: float = 2e-3,
    seed: int = 0,
    augment: bool = True,
    on_step: Callable[[int, float], None] | None = None,
    device="cpu",
) -> Wrapped:
    """Trains f on (clean (N, H, W) images + N(0, sigma^2)), MSE in input units, on `device` (the
    model stays there). The batches and augmentations are drawn on the CPU (one random stream
    whatever the device); the noise is drawn on `device`."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = Wrapped(BACKBONES[backbone](), wrapper).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    data = torch.from_numpy(np.asarray(clean, np.float32)).to(device)
    for step in range(1, steps + 1):
        idx = torch.from_numpy(rng.integers(len(data), size=batch)).to(device)
        x = data[idx][:, None]
        if augment:
            gain = torch.from_numpy(
                np.exp(rng.uniform(np.log(0.25), np.log(4), (batch, 1, 1, 1))).astype(np.float32)
            ).to(device)
            off = torch.from_numpy(rng.uniform(-0.5, 0.5, (batch, 1, 1, 1)).astype(np.float32)).to(device)
            x = gain * x + off
        y = x + sigma * torch.randn_like(x)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(y), x)
        loss.backward()
        opt.step()
        if on_step:
            on_step(step, float(loss))
    return model.eval()
