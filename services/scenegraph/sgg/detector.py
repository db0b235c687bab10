"""The object detector under every SGG model: a tiny CNN with a CenterNet head.

Scene-graph models are built on a pretrained, then frozen, detector (Faster
R-CNN in Scene-Graph-Benchmark.pytorch). No weights are downloaded here, so the
detector is trained on the job's own images: a five-layer CNN (strides 1-2-1-2-1)
and the CenterNet head of Zhou et al., "Objects as Points" (2019): a per-class
centre heatmap trained with the penalty-reduced focal loss (their eq. 1), box
size and sub-pixel offset regressed with L1 at the centres (eqs. 2-3), decoded
by 3x3 max-pool peak picking. A class-agnostic NMS at IoU 0.7 (design choice)
keeps one box per object. Given boxes (SGCls) are labelled by a RoI classifier
on the frozen features.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from paperworks.services.scenegraph.sgg.geometry import box_iou
from paperworks.services.scenegraph.sgg.roi_align import roi_align
from paperworks.services.scenegraph.sgg.sample import Sample
from torch import nn

FINE_STRIDE, COARSE_STRIDE = 2, 4


def image_tensor(images: list[np.ndarray] | np.ndarray, device: torch.device | str = "cpu") -> torch.Tensor:
    """uint8 [B, H, W, 3] -> float [B, 3, H, W] centred at 0, on `device` (moved as uint8)."""
    arr = np.stack(list(images)) if isinstance(images, list) else images
    return torch.as_tensor(arr, device=device).permute(0, 3, 1, 2).float() / 255.0 - 0.5


def _block(cin: int, cout: int, stride: int, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=False),
        nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class TinyBackbone(nn.Module):
    """Returns the stride-2 map (RoI features for relations) and the stride-4 map (detection)."""

    def __init__(self, fine_channels: int = 32, coarse_channels: int = 64):
        super().__init__()
        self.fine = nn.Sequential(_block(3, 24, 1), _block(24, fine_channels, 2),
                                  _block(fine_channels, fine_channels, 1))
        self.coarse = nn.Sequential(_block(fine_channels, coarse_channels, 2),
                                    _block(coarse_channels, coarse_channels, 1, dilation=2))
        self.fine_channels, self.coarse_channels = fine_channels, coarse_channels

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        fine = self.fine(x)
        return fine, self.coarse(fine)


def _head(cin: int, cout: int, bias: float = 0.0) -> nn.Sequential:
    head = nn.Sequential(nn.Conv2d(cin, cin, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(cin, cout, 1))
    nn.init.constant_(head[-1].bias, bias)
    return head


class Detector(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = num_classes
        self.backbone = TinyBackbone()
        c = self.backbone.coarse_channels
        self.heat = _head(c, num_classes, bias=-2.19)  # prior 0.1, as in CenterNet
        self.size = _head(c, 2)
        self.offset = _head(c, 2)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        fine, coarse = self.backbone(x)
        return {"fine": fine, "coarse": coarse, "heat": self.heat(coarse),
                "size": self.size(coarse), "offset": self.offset(coarse)}


class BoxClassifier(nn.Module):
    """Labels given boxes from RoIAlign features of the frozen stride-4 map (SGCls)."""

    def __init__(self, channels: int, num_classes: int, pool: int = 4):
        super().__init__()
        self.pool = pool
        self.mlp = nn.Sequential(nn.Linear(channels * pool * pool, 128), nn.ReLU(),
                                 nn.Linear(128, num_classes))

    def forward(self, coarse: torch.Tensor, boxes: torch.Tensor, batch_index: torch.Tensor) -> torch.Tensor:
        feats = roi_align(coarse, boxes, batch_index, (self.pool, self.pool), 1 / COARSE_STRIDE)
        return self.mlp(feats.flatten(1))


# ------------------------------------------------------------------ targets and loss


def gaussian_radius(h: float, w: float, min_overlap: float = 0.7) -> float:
    """CenterNet's radius: the largest centre shift that keeps IoU >= min_overlap (3 cases)."""
    r1 = (h + w - math.sqrt((h + w) ** 2 - 4 * w * h * (1 - min_overlap) / (1 + min_overlap))) / 2
    r2 = (2 * (h + w) - math.sqrt(4 * (h + w) ** 2 - 16 * (1 - min_overlap) * w * h)) / 4
    a3 = 4 * min_overlap
    b3 = -2 * min_overlap * (h + w)
    c3 = (min_overlap - 1) * w * h
    r3 = (-b3 + math.sqrt(b3**2 - 4 * a3 * c3)) / (2 * a3)
    return min(r1, r2, r3)


def detection_targets(samples: list[Sample], num_classes: int, out_h: int, out_w: int,
                      device: torch.device | str = "cpu"):
    heat = np.zeros((len(samples), num_classes, out_h, out_w), np.float32)
    size = np.zeros((len(samples), 2, out_h, out_w), np.float32)
    offset = np.zeros_like(size)
    mask = np.zeros((len(samples), out_h, out_w), np.float32)
    yy, xx = np.mgrid[0:out_h, 0:out_w]
    for b, s in enumerate(samples):
        for box, label in zip(s.boxes, s.labels, strict=True):
            w, h = (box[2] - box[0]) / COARSE_STRIDE, (box[3] - box[1]) / COARSE_STRIDE
            cx, cy = (box[0] + box[2]) / 2 / COARSE_STRIDE, (box[1] + box[3]) / 2 / COARSE_STRIDE
            ix, iy = min(int(cx), out_w - 1), min(int(cy), out_h - 1)
            sigma = (2 * max(0, int(gaussian_radius(h, w))) + 1) / 6
            g = np.exp(-((xx - ix) ** 2 + (yy - iy) ** 2) / (2 * sigma**2))
            heat[b, label] = np.maximum(heat[b, label], g)
            size[b, :, iy, ix] = (w, h)
            offset[b, :, iy, ix] = (cx - ix, cy - iy)
            mask[b, iy, ix] = 1.0
    return tuple(torch.as_tensor(a, device=device) for a in (heat, size, offset, mask))


def focal_loss(logits: torch.Tensor, target: torch.Tensor, alpha: float = 2, beta: float = 4) -> torch.Tensor:
    """CenterNet eq. 1, normalized by the number of objects."""
    p = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    pos = target.eq(1).float()
    pos_loss = torch.log(p) * (1 - p) ** alpha * pos
    neg_loss = torch.log(1 - p) * p**alpha * (1 - target) ** beta * (1 - pos)
    return -(pos_loss.sum() + neg_loss.sum()) / pos.sum().clamp(min=1)


def detection_loss(out: dict, targets) -> torch.Tensor:
    heat, size, offset, mask = targets
    n = mask.sum().clamp(min=1)
    m = mask[:, None]
    size_loss = (F.l1_loss(out["size"], size, reduction="none") * m).sum() / n
    offset_loss = (F.l1_loss(out["offset"], offset, reduction="none") * m).sum() / n
    return focal_loss(out["heat"], heat) + 0.1 * size_loss + offset_loss


# ------------------------------------------------------------------ training


def mirrored(sample: Sample) -> Sample:
    """The sample flipped left-right (detector augmentation)."""
    w = sample.image.shape[1]
    boxes = sample.boxes.copy()
    boxes[:, [0, 2]] = w - sample.boxes[:, [2, 0]]
    return Sample(np.ascontiguousarray(sample.image[:, ::-1]), boxes, sample.labels, sample.relations)


def train_detector(samples: list[Sample], num_classes: int, epochs: int, seed: int,
                   batch_size: int = 32, lr: float = 3e-3,
                   on_epoch: Callable[[int, float], None] | None = None,
                   device: torch.device | str = "cpu") -> Detector:
    """Built with `seed` on the CPU (the same initial weights on every device), then trained on
    `device` with its images and targets; the shuffling draws from a CPU generator."""
    torch.manual_seed(seed)
    det = Detector(num_classes).to(device)
    views = []  # (images, targets) as drawn and mirrored
    for group in (samples, [mirrored(s) for s in samples]):
        images = image_tensor([s.image for s in group], device)
        h, w = images.shape[2] // COARSE_STRIDE, images.shape[3] // COARSE_STRIDE
        views.append((images, detection_targets(group, num_classes, h, w, device)))
    opt = torch.optim.AdamW(det.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * math.ceil(len(samples) / batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.2)
    gen = torch.Generator().manual_seed(seed)
    det.train()
    for epoch in range(1, epochs + 1):
        order = torch.randperm(len(samples), generator=gen, device=gen.device).to(device)
        flip = (torch.rand(len(samples), generator=gen, device=gen.device) < 0.5).to(device)
        total = 0.0
        for start in range(0, len(samples), batch_size):
            idx = order[start:start + batch_size]
            f = flip[idx][:, None, None, None]
            x = torch.where(f, views[1][0][idx], views[0][0][idx])
            t = [torch.where(f.view(-1, *([1] * (a.dim() - 1))), b[idx], a[idx])
                 for a, b in zip(views[0][1], views[1][1], strict=True)]
            loss = detection_loss(det(x), t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        if on_epoch is not None:
            on_epoch(epoch, total / len(samples))
    det.eval()
    return det


# ------------------------------------------------------------------ inference


@dataclass
class Detections:
    boxes: torch.Tensor  # [n, 4] pixels
    labels: torch.Tensor  # [n]
    scores: torch.Tensor  # [n]


@torch.no_grad()
def decode(out: dict, image_size: tuple[int, int], max_detections: int = 10,
           score_threshold: float = 0.25, nms_iou: float = 0.7) -> list[Detections]:
    heat = torch.sigmoid(out["heat"])
    peaks = heat * (F.max_pool2d(heat, 3, 1, 1) == heat).float()
    b, c, h, w = peaks.shape
    result = []
    for i in range(b):
        scores, flat = peaks[i].flatten().topk(min(max_detections * 3, c * h * w))
        keep = scores >= score_threshold
        scores, flat = scores[keep], flat[keep]
        labels, rest = flat // (h * w), flat % (h * w)
        ys, xs = rest // w, rest % w
        off, size = out["offset"][i, :, ys, xs], out["size"][i, :, ys, xs].clamp(min=0.5)
        cx, cy = (xs.float() + off[0]) * COARSE_STRIDE, (ys.float() + off[1]) * COARSE_STRIDE
        bw, bh = size[0] * COARSE_STRIDE, size[1] * COARSE_STRIDE
        boxes = torch.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], -1)
        boxes[:, 0::2] = boxes[:, 0::2].clamp(0, image_size[1])
        boxes[:, 1::2] = boxes[:, 1::2].clamp(0, image_size[0])
        kept = _nms(boxes, scores, nms_iou)[:max_detections]
        result.append(Detections(boxes[kept], labels[kept], scores[kept]))
    return result


def _nms(boxes: torch.Tensor, scores: torch.Tensor, iou: float) -> torch.Tensor:
    """Indices of the kept boxes (greedy by score), on the boxes' device; the few pairwise IoUs are
    read once on the CPU."""
    order = scores.argsort(descending=True)
    ious = box_iou(boxes, boxes).cpu()
    kept: list[int] = []
    for i in order.tolist():
        if all(ious[i, j] <= iou for j in kept):
            kept.append(i)
    return torch.tensor(kept, dtype=torch.long, device=boxes.device)


def train_box_classifier(coarse: torch.Tensor, samples: list[Sample], num_classes: int, epochs: int,
                         seed: int) -> BoxClassifier:
    """Fits the SGCls box classifier on ground-truth boxes over the frozen stride-4 features, on their
    device (built with `seed` on the CPU, then moved)."""
    torch.manual_seed(seed)
    device = coarse.device
    clf = BoxClassifier(coarse.shape[1], num_classes).to(device)
    boxes = torch.as_tensor(np.concatenate([s.boxes for s in samples]), device=device)
    labels = torch.as_tensor(np.concatenate([s.labels for s in samples]), device=device)
    index = torch.as_tensor(np.repeat(np.arange(len(samples)), [len(s.boxes) for s in samples]),
                            dtype=torch.long, device=device)
    with torch.no_grad():
        feats = roi_align(coarse, boxes, index, (clf.pool, clf.pool), 1 / COARSE_STRIDE).flatten(1)
    fit_on_pooled(clf.mlp, feats, labels, F.cross_entropy, epochs, seed, lr=3e-3)
    clf.eval()
    return clf


def fit_on_pooled(mlp: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: Callable, epochs: int, seed: int,
                  lr: float, weight_decay: float = 0.0, batch_size: int = 256) -> None:
    """Minibatch Adam for a head fitted on pooled RoI features of the frozen detector (`mlp`, `x` and
    `y` on one device; the shuffling draws from a CPU generator)."""
    opt = torch.optim.Adam(mlp.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=gen, device=gen.device).to(x.device)
        for start in range(0, len(y), batch_size):
            idx = order[start:start + batch_size]
            value = loss(mlp(x[idx]), y[idx])
            opt.zero_grad()
            value.backward()
            opt.step()
