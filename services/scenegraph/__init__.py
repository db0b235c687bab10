"""The scene-graph service: DS-Net dual-stream predicate heads on MOTIFS- and PE-Net-style models."""
