"""Pair geometry, RoIAlign, SGDet matching and the benchmark's R@K / ngR@K / mR@K."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from paperworks.services.scenegraph.dsnet.geometry import PAIR_GEOMETRY_DIM, pair_geometry
from paperworks.services.scenegraph.sgg.features import Features, match_detections
from paperworks.services.scenegraph.sgg.geometry import box_iou
from paperworks.services.scenegraph.sgg.metrics import evaluate, head_tail_split, ranked_triplets
from paperworks.services.scenegraph.sgg.roi_align import roi_align
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary


def test_pair_geometry_offsets_scales_overlap_distance_angle():
    s = torch.tensor([0.0, 0.0, 10.0, 10.0])
    o = torch.tensor([5.0, 0.0, 25.0, 10.0])  # to the right, twice as wide, overlapping half of s
    g = pair_geometry(s, o, 100.0)
    assert g.shape == (PAIR_GEOMETRY_DIM,)
    assert g[0] == pytest.approx(1.0) and g[1] == pytest.approx(0.0)  # centre offset / subject size
    assert g[2] == pytest.approx(math.log(2)) and g[3] == pytest.approx(0.0)  # log scale ratios
    assert g[4] == pytest.approx(50 / 250)  # IoU
    assert g[5] == pytest.approx(0.5) and g[6] == pytest.approx(0.25)  # overlap / subject, / object
    assert g[7] == pytest.approx(0.1 * math.sqrt(2))  # centre distance (normalized by the diagonal)
    assert g[8] == pytest.approx(0.0, abs=1e-6) and g[9] == pytest.approx(1.0)  # angle: object to the right
    assert g[10] == pytest.approx(0.01) and g[11] == pytest.approx(0.02)  # areas


def test_box_iou():
    a = torch.tensor([[0.0, 0, 10, 10]])
    b = torch.tensor([[0.0, 0, 10, 10], [5.0, 0, 15, 10], [20.0, 20, 30, 30]])
    assert box_iou(a, b)[0].tolist() == pytest.approx([1.0, 1 / 3, 0.0])


def test_roi_align_averages_bilinear_samples_in_each_bin():
    ramp = torch.arange(16.0).repeat(16, 1)[None, None]  # value = x index of the pixel
    out = roi_align(ramp, torch.tensor([[4.0, 0.0, 12.0, 8.0]]), torch.tensor([0]), (2, 2), 1.0)
    # bins span x in [4, 8) and [8, 12): pixel-centre coordinates 3.5.. -> mean value 5.5 and 9.5
    assert out[0, 0, 0].tolist() == pytest.approx([5.5, 9.5])
    assert out[0, 0, 1].tolist() == pytest.approx([5.5, 9.5])
    empty = roi_align(ramp, torch.zeros(0, 4), torch.zeros(0, dtype=torch.long), (2, 2), 1.0)
    assert empty.shape == (0, 1, 2, 2)


def test_sgdet_matching_needs_iou_half_and_the_same_label():
    gt = torch.tensor([[0.0, 0, 10, 10], [20.0, 20, 30, 30]])
    det = torch.tensor([[0.0, 0, 10, 19.0], [0.0, 0, 10, 21.0], [20.0, 20, 30, 30]])
    # IoU 100/190 >= 0.5 matches; 100/210 < 0.5 does not; the third has the wrong label
    assert match_detections(det[:2], torch.tensor([0, 0]), gt, torch.tensor([0, 1])).tolist() == [0, -1]
    assert match_detections(det[1:], torch.tensor([0, 0]), gt, torch.tensor([0, 1])).tolist() == [-1, -1]
    # one-to-one: two detections of one object, the better one wins
    two = torch.tensor([[0.0, 0, 10, 12], [0.0, 0, 10, 10]])
    assert match_detections(two, torch.tensor([0, 0]), gt[:1], torch.tensor([0])).tolist() == [-1, 0]


VOCAB = Vocabulary(classes=["a", "b"], predicates=["on", "near", "riding"], geometric=["on", "near"])


def _features(boxes, labels, scores) -> Features:
    n = len(boxes)
    return Features(boxes=torch.tensor([boxes]), labels=torch.tensor([labels]), scores=torch.tensor([scores]),
                    valid=torch.ones(1, n, dtype=torch.bool), obj_feats=torch.zeros(1, n, 1),
                    union_feats=torch.zeros(1, n, n, 1, 1, 1),
                    rel_labels=torch.zeros(1, n, n, dtype=torch.long),
                    gt_index=torch.arange(n)[None], image_size=64)


def _scores(n: int, entries: dict) -> torch.Tensor:
    """[1, n, n, 4] predicate distributions: background 1 except the given (s, o) -> {r: p}."""
    p = torch.zeros(1, n, n, 4)
    p[..., 0] = 1.0
    for (s, o), dist in entries.items():
        p[0, s, o] = 0
        for r, v in dist.items():
            p[0, s, o, r] = v
        p[0, s, o, 0] = 1 - sum(dist.values())
    return p


BOXES = [[0.0, 0, 10, 10], [20.0, 0, 30, 10], [40.0, 0, 50, 10]]


def test_graph_constraint_keeps_one_predicate_per_pair():
    feats = _features(BOXES, [0, 1, 1], [1.0, 1.0, 1.0])
    pred = _scores(3, {(0, 1): {1: 0.5, 3: 0.4}, (0, 2): {2: 0.3}})
    trip, sc = ranked_triplets(3, feats.scores[0], pred[0], graph_constraint=True)
    assert trip[:2].tolist() == [[0, 1, 1], [0, 2, 2]] and sc[:2].tolist() == pytest.approx([0.5, 0.3])
    assert len(trip) == 6  # one per ordered pair
    trip, sc = ranked_triplets(3, feats.scores[0], pred[0], graph_constraint=False)
    assert trip[:3].tolist() == [[0, 1, 1], [0, 1, 3], [0, 2, 2]] and len(trip) == 6 * 3


def test_recall_no_graph_recall_and_mean_recall():
    # ground truth: (0 on 1), (0 riding 1), (2 near 1); the model ranks "on" first for (0, 1)
    sample = Sample(np.zeros((64, 64, 3), np.uint8), np.array(BOXES, np.float32), np.array([0, 1, 1]),
                    np.array([[0, 1, 1], [0, 1, 3], [2, 1, 2]]))
    feats = _features(BOXES, [0, 1, 1], [1.0, 1.0, 1.0])
    pred = _scores(3, {(0, 1): {1: 0.5, 3: 0.4}, (2, 1): {2: 0.6}})
    m = evaluate([sample], feats, pred, VOCAB, np.array([0, 10, 5, 1.0]))
    assert m["R@20"] == pytest.approx(2 / 3)  # riding loses to "on" on the same pair
    assert m["ngR@20"] == pytest.approx(1.0)
    assert m["mR@20"] == pytest.approx((1 + 1 + 0) / 3)
    assert m["per_predicate_R@100"] == {"on": 1.0, "near": 1.0, "riding": 0.0}
    assert m["mR@100_geometric"] == 1.0 and m["mR@100_non_geometric"] == 0.0
    assert m["mR@100_tail"] == pytest.approx(0.5) and m["tail_predicates"] == ["near", "riding"]
    assert m["ng_as_geo_rate"] == 1.0  # the riding pair's top-1 is geometric


def test_sgdet_recall_counts_only_boxes_at_iou_half_with_the_right_label():
    sample = Sample(np.zeros((64, 64, 3), np.uint8), np.array(BOXES[:2], np.float32), np.array([0, 1]),
                    np.array([[0, 1, 1]]))
    pred = _scores(2, {(0, 1): {1: 0.9}})
    good = _features([[0.0, 0, 10, 19], [20.0, 0, 30, 10]], [0, 1], [0.9, 0.9])
    far = _features([[0.0, 0, 10, 21], [20.0, 0, 30, 10]], [0, 1], [0.9, 0.9])
    wrong = _features([[0.0, 0, 10, 10], [20.0, 0, 30, 10]], [1, 1], [0.9, 0.9])
    assert evaluate([sample], good, pred, VOCAB)["R@20"] == 1.0
    assert evaluate([sample], far, pred, VOCAB)["R@20"] == 0.0
    assert evaluate([sample], wrong, pred, VOCAB)["R@20"] == 0.0


def test_recall_at_k_truncates_the_ranking():
    boxes = [[float(10 * i), 0, float(10 * i + 8), 8] for i in range(6)]
    rels = [[i, i + 1, 1] for i in range(5)]
    sample = Sample(np.zeros((64, 64, 3), np.uint8), np.array(boxes, np.float32), np.zeros(6, np.int64),
                    np.array(rels))
    feats = _features(boxes, [0] * 6, [1.0] * 6)
    # 30 ordered pairs; the annotated ones score lowest of all but still above background
    pairs = [(s, o) for s in range(6) for o in range(6) if s != o]
    pred = _scores(6, {(s, o): {1: 0.1 if [s, o, 1] in rels else 0.2} for s, o in pairs})
    m = evaluate([sample], feats, pred, VOCAB)
    assert m["R@20"] == 0.0 and m["R@50"] == 1.0


def test_head_tail_split_puts_the_rarer_half_in_the_tail():
    head, tail = head_tail_split(np.array([0, 50, 3, 20, 1.0]))
    assert head == {1, 3} and tail == {2, 4}
