"""The scene-graph-generation stack every predicate head sits on: Scene-Graph-Benchmark.pytorch in
miniature, pure PyTorch, no platform imports.

- `sample`, `vocab`: one annotated image; the classes, predicates and the geometric / non-geometric
  predicate split a model is built with;
- `geometry`, `roi_align`: box arithmetic and RoIAlign;
- `detector`: the frozen detector under every head (a tiny CNN with a CenterNet head) and the SGCls
  box classifier;
- `features`: the frozen detector's output per mode (PredCls / SGCls / SGDet), padded into tensors;
- `components`: what every relation model shares (packed pairs, union-box encoder, frequency prior,
  linear and prototype classifiers);
- `depth_order`: the per-object depth-order estimator (claim 3's object attributes);
- `metrics`: the benchmark's R@K / ngR@K / mR@K and DS-Net's diagnostics.
"""
