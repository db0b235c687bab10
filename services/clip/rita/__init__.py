"""RITA: Robust test-time prompt adaptation for CLIP with optimal transport and a dynamic cache
(Zhu, Wu, Wang, Zhu, Ge, Zhang, Chen; ICML 2026, arXiv 2607.09450), with its attack harness and
the baselines it is compared with (zero-shot, view Ensemble, TPT, R-TPT, TDA). Pure PyTorch; the
Sinkhorn solver is `paperworks.kernels.ops.sinkhorn`. See `methods` for the algorithm and the
choices the paper leaves open."""

from paperworks.services.clip.rita.attack import pgd
from paperworks.services.clip.rita.cache import ClassCache
from paperworks.services.clip.rita.evaluate import evaluate_robustness, table
from paperworks.services.clip.rita.methods import METHODS, Stream, TTAConfig
from paperworks.services.clip.rita.ot import (
    align_to_prototype,
    gaussian_w2,
    ot_distances,
    procrustes,
)
from paperworks.services.clip.rita.prompts import PromptBank
from paperworks.services.clip.rita.views import augment

__all__ = [
    "METHODS",
    "ClassCache",
    "PromptBank",
    "Stream",
    "TTAConfig",
    "align_to_prototype",
    "augment",
    "evaluate_robustness",
    "gaussian_w2",
    "ot_distances",
    "pgd",
    "procrustes",
    "table",
]
