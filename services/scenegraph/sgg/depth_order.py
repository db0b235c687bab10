"""Per-object depth-order attributes, estimated from the frozen detector's pixels.

Which of two overlapping objects is in front only the pixels show (the covered
one's outline is cut); the boxes cannot. The detector is trained for class centres
and box sizes, and its features keep that order in no form the relation heads
learn from a few hundred labelled pairs (docs/reproductions/scenegraph.md, claim 3).
So, like the SGCls box classifier, a small classifier is fitted on the frozen
detector's stride-2 map after detection training: per object, the logits of
"covers an overlapping object" and "is covered by one". Targets come from the
objects' depth annotation (draw order) where the dataset has one, else from its
annotated depth-order relations (`Vocabulary.depth_order`, e.g. "in front of" /
"behind"; sparse, so measured worse: docs/reproductions/scenegraph.md, claim 3).
The estimates reach the relation models as object attributes (`Features.attributes`).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from paperworks.services.scenegraph.sgg.detector import (
    FINE_STRIDE,
    Detector,
    decode,
    fit_on_pooled,
    image_tensor,
)
from paperworks.services.scenegraph.sgg.features import match_detections
from paperworks.services.scenegraph.sgg.roi_align import roi_align
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from torch import nn

ATTRIBUTES = 2  # logits: drawn over an overlapping object, covered by one


class DepthOrderEstimator(nn.Module):
    def __init__(self, channels: int, pool: int = 8, hidden: int = 128):
        super().__init__()
        self.pool, self.width = pool, ATTRIBUTES
        self.mlp = nn.Sequential(nn.Linear(channels * pool * pool, hidden), nn.ReLU(),
                                 nn.Linear(hidden, ATTRIBUTES))

    def pooled(self, fine: torch.Tensor, boxes: torch.Tensor, batch_index: torch.Tensor) -> torch.Tensor:
        return roi_align(fine, boxes, batch_index, (self.pool, self.pool), 1 / FINE_STRIDE).flatten(1)

    def forward(self, fine: torch.Tensor, boxes: torch.Tensor, batch_index: torch.Tensor) -> torch.Tensor:
        """[K, 2] logits (covers an overlapping object, is covered by one) for boxes [K, 4] on the
        stride-2 maps `fine`."""
        return self.mlp(self.pooled(fine, boxes, batch_index))


def ordered_pairs(sample: Sample, front: int, behind: int) -> list[tuple[int, int]]:
    """(nearer, farther) object index pairs: every overlapping pair of the objects' depth annotation
    where there is one, else the annotated depth-order relations."""
    if sample.depth is not None:
        b, depth = sample.boxes, sample.depth
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        sides = np.minimum(b[:, None, 2:], b[None, :, 2:]) - np.maximum(b[:, None, :2], b[None, :, :2])
        inter = sides.clip(min=0).prod(-1)
        smaller = np.minimum(area[:, None], area[None, :])
        # partly covering, as the box rules' "in front of" (not a box inside another: "in")
        keep = (depth[:, None] > depth[None, :]) & (inter > 0.1 * smaller) & (inter < 0.85 * smaller)
        return [(int(i), int(j)) for i, j in np.argwhere(keep)]
    out = []
    for s, o, p in sample.relations.tolist():
        if p == front:
            out.append((s, o))
        elif p == behind:
            out.append((o, s))
    return out


@torch.no_grad()
def _training_rois(detector: Detector, estimator: DepthOrderEstimator, samples: list[Sample],
                   front: int, behind: int, max_detections: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pooled features and targets of the ground-truth boxes and of the detections matched to them, on
    the detector's device."""
    device = next(detector.parameters()).device
    feats, targets = [], []
    for start in range(0, len(samples), 64):
        chunk = samples[start:start + 64]
        maps = detector(image_tensor([s.image for s in chunk], device))
        dets = decode(maps, chunk[0].image.shape[:2], max_detections=max_detections)
        for k, sample in enumerate(chunk):
            t = np.zeros((len(sample.labels), ATTRIBUTES), np.float32)
            for near, far in ordered_pairs(sample, front, behind):
                t[near, 0], t[far, 1] = 1.0, 1.0
            t = torch.as_tensor(t, device=device)
            gt_boxes = torch.as_tensor(sample.boxes, device=device).float()
            match = match_detections(dets[k].boxes, dets[k].labels, gt_boxes,
                                     torch.as_tensor(sample.labels, device=device))
            hit = match >= 0
            boxes = torch.cat([gt_boxes, dets[k].boxes[hit]])
            index = torch.zeros(len(boxes), dtype=torch.long, device=device)
            feats.append(estimator.pooled(maps["fine"][k:k + 1], boxes, index))
            targets.append(torch.cat([t, t[match[hit]]]))
    return torch.cat(feats), torch.cat(targets)


def train_depth_order(detector: Detector, samples: list[Sample], vocab: Vocabulary, seed: int,
                      epochs: int = 30, max_detections: int = 8) -> DepthOrderEstimator:
    """Fitted on the ground-truth boxes and the detections matched to them (what it sees in SGDet), on
    the detector's device (built with `seed` on the CPU, then moved)."""
    front, behind = (vocab.predicate_index(p) for p in vocab.depth_order) if vocab.depth_order else (-1, -1)
    torch.manual_seed(seed)
    estimator = DepthOrderEstimator(detector.backbone.fine_channels).to(next(detector.parameters()).device)
    x, y = _training_rois(detector, estimator, samples, front, behind, max_detections)
    fit_on_pooled(estimator.mlp, x, y, F.binary_cross_entropy_with_logits, epochs, seed, lr=2e-3,
                  weight_decay=1e-4)
    estimator.eval()
    return estimator
