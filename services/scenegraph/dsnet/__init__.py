"""DS-Net: Dual-stream Synergistic Network for scene graph generation (ICML 2026), reconstructed.

Only the paper's abstract is public (no text or code was found: shared/research/methods-vision.md,
section 3): biased scene-graph models over-predict geometric predicates, partly because geometric and
non-geometric predicates that co-occur get entangled representations; DS-Net models them in two
streams (space and vision) with bidirectional fusion, as a plug-in predicate head for existing SGG
models, and reports +1.3 to +6.1 mR@100 in SGGen. This package implements that head:

- `head`: `DSNetHead` (space stream, vision stream, `CrossFusion` each way, the merged distribution
  and the per-stream auxiliary logits) and `DSNetConfig` (its switches and ablations); the module's
  docstring says which parts follow the abstract and which are design choices;
- `geometry`: the space stream's pair geometry.

Pure PyTorch, no platform imports: it builds on the shared SGG stack (`..sgg`).
"""
from paperworks.services.scenegraph.dsnet.head import CrossFusion, DSNetConfig, DSNetHead

__all__ = ["CrossFusion", "DSNetConfig", "DSNetHead"]
