"""DS-Net's pair geometry: the space stream's input per (subject, object).

Relative offsets, log scale ratios, IoU and overlap ratios, distance, angle, areas (the
list in the DS-Net abstract), plus the signed edge gaps the box rules are made of.
Boxes are (x1, y1, x2, y2) in pixels; everything is normalized by the image size.
"""
from __future__ import annotations

import math

import torch

PAIR_GEOMETRY_DIM = 18


def pair_geometry(s: torch.Tensor, o: torch.Tensor, size: float) -> torch.Tensor:
    """[..., 4] subject and object boxes -> [..., PAIR_GEOMETRY_DIM]."""
    sw, sh = (s[..., 2] - s[..., 0]).clamp(min=1e-3), (s[..., 3] - s[..., 1]).clamp(min=1e-3)
    ow, oh = (o[..., 2] - o[..., 0]).clamp(min=1e-3), (o[..., 3] - o[..., 1]).clamp(min=1e-3)
    scx, scy, ocx, ocy = s[..., 0] + sw / 2, s[..., 1] + sh / 2, o[..., 0] + ow / 2, o[..., 1] + oh / 2
    ix = torch.minimum(s[..., 2], o[..., 2]) - torch.maximum(s[..., 0], o[..., 0])
    iy = torch.minimum(s[..., 3], o[..., 3]) - torch.maximum(s[..., 1], o[..., 1])
    inter = ix.clamp(min=0) * iy.clamp(min=0)
    s_area, o_area = sw * sh, ow * oh
    iou = inter / (s_area + o_area - inter)
    dx, dy = (ocx - scx) / size, (ocy - scy) / size
    dist = torch.sqrt(dx**2 + dy**2 + 1e-12)
    angle = torch.atan2(dy, dx)
    return torch.stack([
        (ocx - scx) / sw, (ocy - scy) / sh,
        torch.log(ow / sw), torch.log(oh / sh),
        iou, inter / s_area, inter / o_area,
        dist * math.sqrt(2), torch.sin(angle), torch.cos(angle),
        s_area / size**2, o_area / size**2,
        ix / size, iy / size,
        (s[..., 3] - o[..., 1]) / size, (s[..., 1] - o[..., 3]) / size,
        (s[..., 2] - o[..., 0]) / size, (s[..., 0] - o[..., 2]) / size,
    ], -1)
