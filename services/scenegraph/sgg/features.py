"""The frozen detector's output for a set of images, padded into tensors a relation head trains on.

As in Scene-Graph-Benchmark.pytorch the detector is frozen while relation heads
train, so its per-image output is computed once: objects (boxes, labels, label
scores) for the evaluation mode, object RoI features (RoIAlign 4x4 on the
stride-4 map), union-box RoI features (RoIAlign 6x6 on the stride-2 map) for
every ordered pair, and each pair's relation label:

- predcls: ground-truth boxes and labels;
- sgcls: ground-truth boxes, labels from the RoI box classifier;
- sgdet: detected boxes and labels; a detection is matched to a ground-truth
  object of the same label at IoU >= 0.5 (greedy by IoU), and a pair's relation
  label is the annotated relation between the matched ground-truth objects, else
  background (the benchmark's SGDet relation sampling, `detect_relsample`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from paperworks.services.scenegraph.sgg.detector import (
    COARSE_STRIDE,
    FINE_STRIDE,
    BoxClassifier,
    Detections,
    Detector,
    decode,
    image_tensor,
)
from paperworks.services.scenegraph.sgg.geometry import box_iou, union_boxes
from paperworks.services.scenegraph.sgg.roi_align import roi_align
from paperworks.services.scenegraph.sgg.sample import Sample

MODES = ("predcls", "sgcls", "sgdet")
OBJ_POOL, UNION_POOL = 4, 6
MATCH_IOU = 0.5


@dataclass
class Features:
    boxes: torch.Tensor  # [B, N, 4]
    labels: torch.Tensor  # [B, N] long
    scores: torch.Tensor  # [B, N]
    valid: torch.Tensor  # [B, N] bool
    obj_feats: torch.Tensor  # [B, N, Do] float16
    union_feats: torch.Tensor  # [B, N, N, Cu, UNION_POOL, UNION_POOL] float16
    rel_labels: torch.Tensor  # [B, N, N] long; -1 where no pair (diagonal, padding)
    gt_index: torch.Tensor  # [B, N] long; matched ground-truth object or -1
    image_size: int
    attributes: torch.Tensor | None = None  # [B, N, A]: the detector's per-object attribute estimates

    def object_inputs(self) -> torch.Tensor:
        """[B, N, Do + A]: each object's RoI feature with its attribute estimates appended."""
        if self.attributes is None:
            return self.obj_feats.float()
        return torch.cat([self.obj_feats.float(), self.attributes], -1)

    def __len__(self) -> int:
        return self.boxes.shape[0]

    def take(self, idx: torch.Tensor) -> Features:
        return Features(self.boxes[idx], self.labels[idx], self.scores[idx], self.valid[idx],
                        self.obj_feats[idx], self.union_feats[idx], self.rel_labels[idx],
                        self.gt_index[idx], self.image_size,
                        None if self.attributes is None else self.attributes[idx])


class AttributeEstimator(Protocol):
    width: int

    def __call__(self, fine: torch.Tensor, boxes: torch.Tensor, batch_index: torch.Tensor
                 ) -> torch.Tensor: ...


@dataclass
class Objects:
    boxes: torch.Tensor
    labels: torch.Tensor
    scores: torch.Tensor


def match_detections(det_boxes: torch.Tensor, det_labels: torch.Tensor, gt_boxes: torch.Tensor,
                     gt_labels: torch.Tensor) -> torch.Tensor:
    """Greedy one-to-one matching at IoU >= 0.5 and equal labels: [n_det] ground-truth index or -1, on
    the detections' device."""
    match = torch.full((len(det_boxes),), -1, dtype=torch.long, device=det_boxes.device)
    if len(det_boxes) == 0 or len(gt_boxes) == 0:
        return match
    iou = box_iou(det_boxes, gt_boxes)
    iou[det_labels[:, None] != gt_labels[None, :]] = -1
    while True:
        best = iou.max()
        if best < MATCH_IOU:
            return match
        d, g = divmod(int(iou.argmax()), iou.shape[1])
        match[d] = g
        iou[d, :] = -1
        iou[:, g] = -1


def _objects(mode: str, sample: Sample, det: Detections | None, cls_logits: torch.Tensor | None,
             device: torch.device) -> Objects:
    boxes = torch.as_tensor(sample.boxes, device=device).float()
    if mode == "predcls":
        labels = torch.as_tensor(sample.labels, device=device)
        return Objects(boxes, labels, torch.ones(len(boxes), device=device))
    if mode == "sgcls":
        probs = cls_logits.softmax(-1)
        return Objects(boxes, probs.argmax(-1), probs.max(-1).values)
    return Objects(det.boxes, det.labels, det.scores)


@torch.no_grad()
def extract(detector: Detector, classifier: BoxClassifier | None, samples: list[Sample], mode: str,
            max_objects: int, batch_size: int = 64, attributes: AttributeEstimator | None = None) -> Features:
    """`attributes`: per-object attribute estimates on the stride-2 map (`depth_order`), if any. Every
    tensor, the returned batch included, is on the detector's device."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    device = next(detector.parameters()).device
    size = samples[0].image.shape[0]
    n_img, n = len(samples), max_objects
    obj_dim = detector.backbone.coarse_channels * OBJ_POOL * OBJ_POOL
    cu = detector.backbone.fine_channels
    on = {"device": device}
    out = Features(
        boxes=torch.zeros(n_img, n, 4, **on), labels=torch.zeros(n_img, n, dtype=torch.long, **on),
        scores=torch.zeros(n_img, n, **on), valid=torch.zeros(n_img, n, dtype=torch.bool, **on),
        obj_feats=torch.zeros(n_img, n, obj_dim, dtype=torch.float16, **on),
        union_feats=torch.zeros(n_img, n, n, cu, UNION_POOL, UNION_POOL, dtype=torch.float16, **on),
        rel_labels=torch.full((n_img, n, n), -1, dtype=torch.long, **on),
        gt_index=torch.full((n_img, n), -1, dtype=torch.long, **on), image_size=size,
        attributes=None if attributes is None else torch.zeros(n_img, n, attributes.width, **on))
    for start in range(0, n_img, batch_size):
        chunk = samples[start:start + batch_size]
        maps = detector(image_tensor([s.image for s in chunk], device))
        dets = decode(maps, (size, size), max_detections=n) if mode == "sgdet" else None
        for k, sample in enumerate(chunk):
            b = start + k
            cls_logits = None
            if mode == "sgcls":
                boxes = torch.as_tensor(sample.boxes, device=device).float()
                zero = torch.zeros(len(boxes), dtype=torch.long, device=device)
                cls_logits = classifier(maps["coarse"][k:k + 1], boxes, zero)
            objs = _objects(mode, sample, dets[k] if dets else None, cls_logits, device)
            m = min(len(objs.boxes), n)
            if m == 0:
                continue
            boxes = objs.boxes[:m]
            out.boxes[b, :m], out.labels[b, :m], out.scores[b, :m] = boxes, objs.labels[:m], objs.scores[:m]
            out.valid[b, :m] = True
            zero = torch.zeros(m, dtype=torch.long, device=device)
            out.obj_feats[b, :m] = roi_align(maps["coarse"][k:k + 1], boxes, zero, (OBJ_POOL, OBJ_POOL),
                                             1 / COARSE_STRIDE).flatten(1).half()
            if attributes is not None:
                out.attributes[b, :m] = attributes(maps["fine"][k:k + 1], boxes, zero)
            ids = torch.arange(m, device=device)
            si, oi = torch.meshgrid(ids, ids, indexing="ij")
            union = union_boxes(boxes[si.flatten()], boxes[oi.flatten()])
            feats = roi_align(maps["fine"][k:k + 1], union, torch.zeros(m * m, dtype=torch.long, **on),
                              (UNION_POOL, UNION_POOL), 1 / FINE_STRIDE)
            out.union_feats[b, :m, :m] = feats.view(m, m, cu, UNION_POOL, UNION_POOL).half()
            out.rel_labels[b, :m, :m] = 0
            out.rel_labels[b, ids, ids] = -1
            gt = (ids if mode != "sgdet"
                  else match_detections(boxes, objs.labels[:m], torch.as_tensor(sample.boxes, **on).float(),
                                        torch.as_tensor(sample.labels, **on)))
            out.gt_index[b, :m] = gt
            _assign_relations(out, b, gt, sample)
    return out


def _assign_relations(out: Features, b: int, gt: torch.Tensor, sample: Sample) -> None:
    """Pair labels from the annotated relations of the matched ground-truth objects: the first
    (non-background) relation annotated on a pair of two distinct objects, written at once on the
    batch's device."""
    where = {int(g): d for d, g in enumerate(gt.tolist()) if g >= 0}
    labelled: dict[tuple[int, int], int] = {}
    for s, o, p in sample.relations.tolist():
        if s in where and o in where and where[s] != where[o] and p != 0:
            labelled.setdefault((where[s], where[o]), p)
    if labelled:
        on = {"dtype": torch.long, "device": out.rel_labels.device}
        subj, obj = (torch.tensor(ids, **on) for ids in zip(*labelled, strict=True))
        out.rel_labels[b, subj, obj] = torch.tensor(list(labelled.values()), **on)
