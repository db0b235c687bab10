"""MILD: margin-based imbalanced learning to defer.

Cortes, Mao, Mohri, Zhong, "Optimized Deferral for Imbalanced Settings", ICML 2026
(arXiv 2604.27723). Two-stage learning to defer with fixed agents (a base predictor and experts,
e.g. LLMs): a rejector r(x) in R^{n+1} sends each input to argmax_j r(x, j). Implemented here:
the deferral costs and the two-stage cost-sensitive CE surrogate it improves on, MILD's additive
per-expert margins and the validation search over their scale (`deferral`, `rejector`), and the
metrics the paper reports, the expert-balanced deferral loss among them (`metrics`).
Pure PyTorch / NumPy: no platform imports.
"""
