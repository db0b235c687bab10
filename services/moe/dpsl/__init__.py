"""DPSL: the Dirichlet-prior shaping loss for upcycled mixtures of experts (Mirvakhabova et al.,
ICML 2026, arXiv 2510.01185), with sparse upcycling / Drop-Upcycling and the router-loss peers, in
miniature: `losses` (DPSL, Switch load balancing, z-loss, composable `RouterTerm`s; the Beta CDF is
the kernel op `paperworks.kernels.ops.beta_cdf_pdf`), `model` (dense/MoE transformer, `upcycle`), `world`
(the synthetic two-modality token stream), `metrics` (per-expert routing metrics), `train`."""

from .losses import DPSL, RouterLoss, RouterTerm, switch_load_balance, z_loss
from .metrics import mutual_information, routing_metrics
from .model import ModelConfig, TokenClassifier, upcycle
from .world import World

__all__ = [
    "DPSL",
    "ModelConfig",
    "RouterLoss",
    "RouterTerm",
    "TokenClassifier",
    "World",
    "mutual_information",
    "routing_metrics",
    "switch_load_balance",
    "upcycle",
    "z_loss",
]
