"""VACSR (Variational Adapter for Cross-modal Similarity Representation, ICML 2026,
arXiv 2605.30968) and its baselines over frozen CLIP features; pure PyTorch, no platform import.

API:
    KINDS = ("vacsr", "infonce", "sigmoid", "pcme", "zero_shot")
    train_adapter(kind, img_feats, txt_feats, labels, *, val=None, config=TrainConfig(),
                  options=None, device="cpu", progress=None) -> (adapter, history)
    score_pairs(adapter, img, txt, device) -> (mean (N,), variance (N,) or None)
    similarity(adapter, img, txt, device) -> (scores (N_i, N_t), uncertainty or None)
    evaluate(adapter, img, txt, labels, relevance=None, threshold=0.75, device) -> metrics dict
    retrieval_metrics(scores, positives, relevance=None, threshold=0.75) -> R@1/5/10, RSUM, mAP@R
    auroc(scores, labels), harmonic_mean(base, novel), swap_captions(labels, fraction, seed)
    adapter_payload(adapter) -> (meta, state); load_adapter(meta, state, device)
"""
from .baselines import AdapterConfig, PCMEAdapter, ResidualAdapter, ZeroShot
from .metrics import auroc, harmonic_mean, map_at_r, recall_at_k, retrieval_metrics
from .model import VACSRAdapter, VACSRConfig
from .train import (
    KINDS,
    TrainConfig,
    adapter_payload,
    build_adapter,
    evaluate,
    load_adapter,
    pair_labels,
    score_pairs,
    similarity,
    swap_captions,
    train_adapter,
)

__all__ = [
    "KINDS", "AdapterConfig", "PCMEAdapter", "ResidualAdapter", "TrainConfig", "VACSRAdapter",
    "VACSRConfig", "ZeroShot", "adapter_payload", "auroc", "build_adapter", "evaluate",
    "harmonic_mean", "load_adapter", "map_at_r", "pair_labels", "recall_at_k", "retrieval_metrics",
    "score_pairs", "similarity", "swap_captions", "train_adapter",
]
