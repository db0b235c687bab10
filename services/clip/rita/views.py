"""Augmented views for test-time methods (TPT, Shu et al. 2022; used unchanged by R-TPT and RITA):
the original image plus N-1 random resized crops with random horizontal flips, as one batched
affine resampling (`grid_sample`), so views of an attacked image are computed like any other."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F


def augment(
    image: torch.Tensor, n: int, generator: torch.Generator, scale=(0.5, 1.0), ratio=(3 / 4, 4 / 3)
) -> torch.Tensor:
    """image (3, H, W) in [0, 1] -> (n, 3, H, W): view 0 is the image itself, the others random
    resized crops (area fraction in `scale`, aspect in `ratio`) resampled to (H, W), flipped with p=1/2."""
    k = n - 1
    area = torch.empty(k).uniform_(*scale, generator=generator)
    logr = torch.empty(k).uniform_(math.log(ratio[0]), math.log(ratio[1]), generator=generator)
    aspect = logr.exp()
    sw = (area * aspect).sqrt().clamp(max=1.0)
    sh = (area / aspect).sqrt().clamp(max=1.0)
    cx = (torch.rand(k, generator=generator) * 2 - 1) * (1 - sw)
    cy = (torch.rand(k, generator=generator) * 2 - 1) * (1 - sh)
    flip = torch.where(torch.rand(k, generator=generator) < 0.5, -1.0, 1.0)
    theta = torch.zeros(k, 2, 3)
    theta[:, 0, 0] = sw * flip
    theta[:, 0, 2] = cx
    theta[:, 1, 1] = sh
    theta[:, 1, 2] = cy
    theta = theta.to(image.device, image.dtype)
    batch = image[None].expand(k, *image.shape)
    grid = F.affine_grid(theta, list(batch.shape), align_corners=False)
    crops = F.grid_sample(batch, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return torch.cat([image[None], crops])
