"""Scene-graph metrics as in Scene-Graph-Benchmark.pytorch (`sgg_eval.py`).

A predicted triplet (subject i, predicate r, object j) hits a ground-truth
triplet when r matches, both labels match and both boxes overlap their ground
truth at IoU >= 0.5 (in PredCls/SGCls the boxes are the ground truth's).

- R@K (graph constraint): each pair keeps its best non-background predicate;
  triplets ranked by score(subject) * score(object) * p(r); recall of the top K
  per image, averaged over images.
- ngR@K (no graph constraint): every (pair, predicate) is a candidate.
- mR@K: per predicate class, the per-image recall over the images holding that
  predicate, averaged over images, then over predicate classes.

Diagnostics for DS-Net's claims: mR@100 over the geometric / non-geometric
groups and over head / tail predicates (tail: the less frequent half in the
training annotations); `ng_as_geo_rate`, the fraction of annotated
non-geometric triplets whose detected pair's top-1 predicate is geometric; and
the geometric share of top-1 predictions on annotated pairs next to its share
in the annotations (over-prediction when the first exceeds the second).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch
from paperworks.services.scenegraph.sgg.features import MATCH_IOU, Features
from paperworks.services.scenegraph.sgg.geometry import box_iou
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary

KS = (20, 50, 100)


def ranked_triplets(boxes_valid: int, obj_scores: torch.Tensor, pred: torch.Tensor,
                    graph_constraint: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """-> ([T, 3] (subject, object, predicate) sorted by score, [T] scores)."""
    m = boxes_valid
    p = pred[:m, :m, 1:]
    pair_score = obj_scores[:m, None] * obj_scores[None, :m]
    off_diag = ~torch.eye(m, dtype=torch.bool, device=pred.device)
    si, oi = off_diag.nonzero(as_tuple=True)
    if graph_constraint:
        best, arg = p[si, oi].max(-1)
        scores, r = pair_score[si, oi] * best, arg + 1
        trip = torch.stack([si, oi, r], 1)
    else:
        r_all = p.shape[-1]
        scores = (pair_score[si, oi, None] * p[si, oi]).flatten()
        trip = torch.stack([si.repeat_interleave(r_all), oi.repeat_interleave(r_all),
                            torch.arange(1, r_all + 1, device=pred.device).repeat(len(si))], 1)
    order = scores.argsort(descending=True, stable=True)
    return trip[order], scores[order]


def _object_match(boxes, labels, gt_boxes, gt_labels) -> torch.Tensor:
    """[m, g]: prediction i can stand for ground-truth object g."""
    if len(boxes) == 0 or len(gt_boxes) == 0:
        return torch.zeros(len(boxes), len(gt_boxes), dtype=torch.bool)
    return (box_iou(boxes, gt_boxes) >= MATCH_IOU) & (labels[:, None] == gt_labels[None, :])


def evaluate(samples: list[Sample], feats: Features, scores: torch.Tensor, vocab: Vocabulary,
             train_predicate_counts: np.ndarray | None = None) -> dict:
    recall = {(gc, k): [] for gc in (True, False) for k in KS}
    per_pred = {k: defaultdict(list) for k in KS}
    geo = set(vocab.geometric_ids)
    ng_total = ng_as_geo = 0
    top1_geo = top1_total = 0
    gt_geo = gt_total = 0
    for b, sample in enumerate(samples):
        if len(sample.relations) == 0:
            continue
        gt = torch.from_numpy(sample.relations)
        gt_total += len(gt)
        gt_geo += sum(int(r) in geo for r in gt[:, 2].tolist())
        m = int(feats.valid[b].sum())
        ok = _object_match(feats.boxes[b, :m], feats.labels[b, :m], torch.from_numpy(sample.boxes).float(),
                           torch.from_numpy(sample.labels))
        for gc in (True, False):
            trip = (ranked_triplets(m, feats.scores[b], scores[b], gc)[0] if m > 1
                    else torch.zeros(0, 3, dtype=torch.long))
            for k in KS:
                top = trip[:k]
                if len(top):
                    hit = (ok[top[:, 0]][:, gt[:, 0]] & ok[top[:, 1]][:, gt[:, 1]]
                           & (top[:, 2:3] == gt[None, :, 2])).any(0)
                else:
                    hit = torch.zeros(len(gt), dtype=torch.bool)
                recall[(gc, k)].append(hit.float().mean().item())
                if gc:
                    for r in gt[:, 2].unique().tolist():
                        sel = gt[:, 2] == r
                        per_pred[k][r].append(hit[sel].float().mean().item())
        if m > 1:
            top1 = scores[b, :m, :m, 1:].argmax(-1) + 1
            for s, o, r in gt.tolist():
                pairs = (ok[:, s][:, None] & ok[:, o][None, :]).nonzero()
                pairs = pairs[pairs[:, 0] != pairs[:, 1]]
                if len(pairs) == 0:
                    continue
                i, j = pairs[0].tolist()
                predicted_geo = int(top1[i, j]) in geo
                top1_total += 1
                top1_geo += predicted_geo
                if r not in geo:
                    ng_total += 1
                    ng_as_geo += predicted_geo
    out: dict = {"images": sum(1 for s in samples if len(s.relations))}
    for k in KS:
        out[f"R@{k}"] = float(np.mean(recall[(True, k)])) if recall[(True, k)] else 0.0
        out[f"ngR@{k}"] = float(np.mean(recall[(False, k)])) if recall[(False, k)] else 0.0
        classes = {r: float(np.mean(v)) for r, v in per_pred[k].items()}
        out[f"mR@{k}"] = float(np.mean(list(classes.values()))) if classes else 0.0
    per100 = {r: float(np.mean(v)) for r, v in per_pred[100].items()}
    out["per_predicate_R@100"] = {vocab.predicate_name(r): v for r, v in sorted(per100.items())}
    out["mR@100_geometric"] = _mean(per100, geo)
    out["mR@100_non_geometric"] = _mean(per100, set(vocab.non_geometric_ids))
    if train_predicate_counts is not None:
        head, tail = head_tail_split(train_predicate_counts)
        out["mR@100_head"], out["mR@100_tail"] = _mean(per100, head), _mean(per100, tail)
        out["tail_predicates"] = [vocab.predicate_name(r) for r in sorted(tail)]
    out["ng_as_geo_rate"] = ng_as_geo / ng_total if ng_total else 0.0
    out["geo_share_predicted"] = top1_geo / top1_total if top1_total else 0.0
    out["geo_share_annotated"] = gt_geo / gt_total if gt_total else 0.0
    return out


def head_tail_split(counts: np.ndarray) -> tuple[set[int], set[int]]:
    """counts[r] for r = 1..R-1 at index r; the less frequent half (rounded up) is the tail."""
    ids = sorted(range(1, len(counts)), key=lambda r: (-counts[r], r))
    cut = len(ids) // 2
    return set(ids[:cut]), set(ids[cut:])


def _mean(per: dict[int, float], ids: set[int]) -> float:
    vals = [v for r, v in per.items() if r in ids]
    return float(np.mean(vals)) if vals else 0.0
