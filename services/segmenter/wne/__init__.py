"""WNE: *Normalization Equivariance for Arbitrary Backbones* (Saied & Fleuret), ICML 2026,
arXiv 2605.08193: wrapped normalization equivariance for blind denoising.

Implements the wrapper f(y) = std(y) · g((y − mean(y)) / std(y)) + mean(y) around any backbone g,
which makes f(ay + b) = a f(y) + b hold exactly (`wrapper.py`), its `input_norm` ablation, the
NE defect and PSNR measures, training on noisy slices, slice-wise volume denoising with statistics
pooled over the volume, and two backbones, DnCNN and a small windowed-attention model
(`backbones.py`). Pure PyTorch: no platform imports.
"""

from paperworks.services.segmenter.wne.backbones import BACKBONES, DnCNN, WindowAttention
from paperworks.services.segmenter.wne.wrapper import (
    EPS,
    Wrapped,
    denoise_volume,
    ne_defect,
    psnr,
    stats,
    train_denoiser,
)

__all__ = [
    "BACKBONES",
    "EPS",
    "DnCNN",
    "WindowAttention",
    "Wrapped",
    "denoise_volume",
    "ne_defect",
    "psnr",
    "stats",
    "train_denoiser",
]
