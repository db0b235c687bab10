"""GaRA: graph-aware LoRA generation for zero-shot graph tasks.

Junshu Sun, Wanxing Chang, Qingming Huang, Shuhui Wang, "GaRA", ICML 2026 (arXiv 2606.22429), §4.1-4.4:

- whole-graph representation  h = MaxPool(GNN(X, A))                          (`encoder`)
- generated left factor       G_f = g(h; Θ) ∈ R^{d×r}, one per adapted projection (`generator`)
- weight update               W = Ŵ + (L + G_f) Rᵀ, Ŵ frozen, L ∈ R^{d×r}, R ∈ R^{k×r}    (`lora`)
- norm constraint             Ĝ = G_f · mean_j‖L_{:,j}‖₁ / (mean_j‖G_f{:,j}‖₁ + ε)        (`generator`)
- training                    answer-token cross-entropy over a mix of source graphs, LM frozen (`train`)
- zero-shot                   one generator forward per unseen graph; ΔW depends on the graph only
- export                      PEFT LoRA: lora_B ← L + Ĝ, lora_A ← Rᵀ, scaling 1           (`peft_export`)

Pure PyTorch (plus `peft` for the export); no platform import.
"""

from paperworks.services.graph.gara.encoder import GraphBatch, GraphEncoder, batch_graphs
from paperworks.services.graph.gara.generator import FactorGenerator, column_l1, norm_constrain
from paperworks.services.graph.gara.lora import ARMS, GaRAModel, LowRankLinear

__all__ = [
    "ARMS",
    "FactorGenerator",
    "GaRAModel",
    "GraphBatch",
    "GraphEncoder",
    "LowRankLinear",
    "batch_graphs",
    "column_l1",
    "norm_constrain",
]
