"""Retrieval and uncertainty metrics for the VACSR reproduction.

- R@K (Recall@K): the fraction of queries with a positive among the K highest scores, image->text
  (rows) and text->image (columns); RSUM = the sum of the six R@{1,5,10} in percent (the
  cross-modal retrieval convention the paper reports).
- mAP@R (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020): for a query with R
  relevant items, (1/R) sum_{i<=R} P@i * rel(i) over the top R retrieved; the ECCV-Caption
  benchmark (Chun et al. 2022) uses it with extra positives. Here the relevant set is the labelled
  positives plus every item whose continuous ground-truth similarity reaches `threshold`.
- AUROC: the Mann-Whitney probability that a random positive outscores a random negative (ties
  count one half).
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import rankdata

KS = (1, 5, 10)


def recall_at_k(scores: torch.Tensor, positives: torch.Tensor, ks=KS) -> dict[int, float]:
    """Row queries: the fraction of rows with a positive among their top-k columns."""
    k_max = min(max(ks), scores.shape[1])
    top = scores.topk(k_max, dim=1).indices
    hit = positives.gather(1, top).bool()
    return {k: float(hit[:, :k].any(1).float().mean()) for k in ks}


def map_at_r(scores: torch.Tensor, relevant: torch.Tensor) -> float:
    """mAP@R over row queries with at least one relevant column."""
    relevant = relevant.bool()
    r = relevant.sum(1)
    keep = r > 0
    scores, relevant, r = scores[keep], relevant[keep], r[keep]
    if len(r) == 0:
        return float("nan")
    order = scores.argsort(dim=1, descending=True)
    rel = relevant.gather(1, order).float()
    ranks = torch.arange(1, rel.shape[1] + 1, device=rel.device, dtype=rel.dtype)
    precision = rel.cumsum(1) / ranks
    within = ranks[None, :] <= r[:, None]
    ap = (precision * rel * within).sum(1) / r
    return float(ap.mean())


def retrieval_metrics(scores: torch.Tensor, positives: torch.Tensor,
                      relevance: torch.Tensor | None = None, threshold: float = 0.75) -> dict:
    """R@1/5/10 both ways, RSUM and (with a continuous ground truth `relevance`, same shape as
    `scores`, images x texts) mAP@R both ways with extra positives relevance >= threshold."""
    scores = scores.detach().float().cpu()
    positives = positives.detach().bool().cpu()
    i2t, t2i = recall_at_k(scores, positives), recall_at_k(scores.T, positives.T)
    out = {f"i2t_r{k}": i2t[k] for k in KS} | {f"t2i_r{k}": t2i[k] for k in KS}
    out["rsum"] = 100.0 * sum(out[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in KS)
    if relevance is not None:
        relevant = positives | (relevance.detach().cpu() >= threshold)
        out["i2t_map_at_r"] = map_at_r(scores, relevant)
        out["t2i_map_at_r"] = map_at_r(scores.T, relevant.T)
        out["map_at_r"] = 0.5 * (out["i2t_map_at_r"] + out["t2i_map_at_r"])
    return out


def auroc(scores, labels) -> float:
    """Area under the ROC curve of `scores` separating labels 1 from 0 (Mann-Whitney U)."""
    scores = np.asarray(torch.as_tensor(scores).detach().float().cpu()).ravel()
    labels = np.asarray(torch.as_tensor(labels).detach().cpu()).ravel().astype(bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("auroc needs both positives and negatives")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def harmonic_mean(base: float, novel: float) -> float:
    """The base-to-novel summary (CoOp/CoCoOp convention): 2 b n / (b + n)."""
    return 0.0 if base + novel <= 0 else 2 * base * novel / (base + novel)
