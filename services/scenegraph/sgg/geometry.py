"""Box arithmetic: IoU, union boxes, MOTIFS' per-box encoding (DS-Net's pair geometry: `dsnet.geometry`).

Boxes are (x1, y1, x2, y2) in pixels.
"""
from __future__ import annotations

import torch

BOX_ENCODING_DIM = 9


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[n, 4] x [m, 4] -> [n, m]."""
    area_a = (a[:, 2] - a[:, 0]).clamp(min=0) * (a[:, 3] - a[:, 1]).clamp(min=0)
    area_b = (b[:, 2] - b[:, 0]).clamp(min=0) * (b[:, 3] - b[:, 1]).clamp(min=0)
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    return inter / (area_a[:, None] + area_b[None, :] - inter).clamp(min=1e-6)


def box_encoding(boxes: torch.Tensor, size: float) -> torch.Tensor:
    """MOTIFS' 9-d box info (Zellers et al. 2018, `encode_box_info`): w, h, centre, corners, area."""
    b = boxes / size
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    cx, cy = b[..., 0] + w / 2, b[..., 1] + h / 2
    return torch.stack([w, h, cx, cy, b[..., 0], b[..., 1], b[..., 2], b[..., 3], w * h], -1)


def union_boxes(s: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    return torch.cat([torch.minimum(s[..., :2], o[..., :2]), torch.maximum(s[..., 2:], o[..., 2:])], -1)
