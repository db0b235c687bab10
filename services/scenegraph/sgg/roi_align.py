"""RoIAlign (He et al., Mask R-CNN, 2017, sec. 3) with bilinear sampling by `grid_sample`.

torchvision's op is not usable beside this torch build, so this is the
"aligned=True" variant written with torch ops: each output bin averages
`sampling_ratio`^2 bilinearly interpolated points at regular positions inside
the bin, with box coordinates shifted by half a pixel so a box's continuous
coordinates map onto pixel centres. Samples outside the map use the border
value (torchvision zeroes points more than one pixel outside; inside boxes the
two agree).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def roi_align(features: torch.Tensor, boxes: torch.Tensor, batch_index: torch.Tensor,
              output_size: tuple[int, int], spatial_scale: float, sampling_ratio: int = 2) -> torch.Tensor:
    """features [B, C, H, W]; boxes [K, 4] (x1, y1, x2, y2) in image pixels; batch_index [K]
    -> [K, C, output_size[0], output_size[1]]. Boxes and batch_index on the features' device."""
    if boxes.numel() == 0:
        return features.new_zeros((0, features.shape[1], *output_size))
    _, _, height, width = features.shape
    ph, pw = output_size
    b = boxes.to(features.dtype) * spatial_scale - 0.5
    bin_w = (b[:, 2] - b[:, 0]) / pw
    bin_h = (b[:, 3] - b[:, 1]) / ph
    like = {"dtype": features.dtype, "device": features.device}
    steps_x = (torch.arange(pw * sampling_ratio, **like) + 0.5) / sampling_ratio
    steps_y = (torch.arange(ph * sampling_ratio, **like) + 0.5) / sampling_ratio
    xs = b[:, 0:1] + steps_x[None, :] * bin_w[:, None]  # [K, pw*s] in pixel-centre coordinates
    ys = b[:, 1:2] + steps_y[None, :] * bin_h[:, None]
    gx = (xs + 0.5) / width * 2 - 1  # align_corners=False: -1 and 1 are the outer pixel edges
    gy = (ys + 0.5) / height * 2 - 1
    grid = torch.stack([gx[:, None, :].expand(-1, gy.shape[1], -1),
                        gy[:, :, None].expand(-1, -1, gx.shape[1])], -1)
    sampled = F.grid_sample(features.index_select(0, batch_index), grid, mode="bilinear",
                            padding_mode="border", align_corners=False)
    return F.avg_pool2d(sampled, sampling_ratio)
