"""SEMIR: *Semantic Minor-Induced Representation learning for small-structure segmentation*
(Miller & Lee), ICML 2026, arXiv 2605.12389.

Implements the method end to end on volumes (2-D images too):
- `minor.py` (§3.1-3.3): the voxel grid graph becomes a graph minor by six parameters (edge
  contraction within ψ of a seed, node deletion by size and mean intensity, edge deletion above α),
  with an exact lifting map and scale/rotation-robust node and edge descriptors; boundary and
  oracle Dice.
- `contraction.py` (§3.1): the seed-relative edge contraction, vectorized through
  `paperworks.kernels.ops.grid_contract`.
- `search.py` (§3.4): few-shot structure learning of the six parameters by boundary Dice with a
  surrogate optimizer (Optuna TPE or an ExtraTrees SMBO).
- `gnn.py` (§3.5): the GINE supernode classifier, trained with Dice + BCE after lifting.

Pure PyTorch/NumPy: no platform imports.
"""
