"""The base scene-graph models the DS-Net head plugs into, each with its original predicate head:
MOTIFS (`motifs`, Zellers et al., CVPR 2018) and PE-Net (`penet`, Zheng et al., CVPR 2023).
Pure PyTorch, no platform imports."""
