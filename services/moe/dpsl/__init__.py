"""DPSL: the Dirichlet-prior shaping loss for upcycled mixtures of experts (Mirvakhabova et al.,
ICML 2026, arXiv 2510.01185), with sparse upcycling / Drop-Upcycling and the router-loss peers, in
miniature: `beta` (Beta CDF/PDF by device-side table interpolation), `losses` (DPSL, Switch load
balancing, z-loss, composable `RouterTerm`s), `model` (dense/MoE transformer, `upcycle`), `world`
(the synthetic two-modality token stream), `metrics` (per-expert routing metrics), `train`."""

from .beta import BetaTable, beta_cdf, beta_pdf
from .losses import DPSL, RouterLoss, RouterTerm, switch_load_balance, z_loss
from .metrics import mutual_information, routing_metrics
from .model import ModelConfig, TokenClassifier, upcycle
from .world import World

__all__ = [
    "DPSL",
    "BetaTable",
    "ModelConfig",
    "RouterLoss",
    "RouterTerm",
    "TokenClassifier",
    "World",
    "beta_cdf",
    "beta_pdf",
    "mutual_information",
    "routing_metrics",
    "switch_load_balance",
    "upcycle",
    "z_loss",
]
