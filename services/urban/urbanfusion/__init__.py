"""UrbanFusion: location representations by stochastic multimodal fusion.

Paper: Mühlematter, Che, Hong, Raubal, Wiedemann, *UrbanFusion: Stochastic Multimodal Fusion for
Contrastive Learning of Robust Spatial Representations*, ICML 2026 (arXiv 2510.13774).

What is implemented here, in pure PyTorch (no platform imports):
- `extractors`: the frozen per-modality feature extractors (§3.1), pluggable by name;
- `location`: the location encoder, coordinates -> one token (§3.1);
- `model`: tokens, stochastic views, the masked Transformer fusion and the loss
  (1 - lambda) L_CL + lambda L_Rec (§3.2-3.3);
- `train`: the pretraining loop;
- `encoder`: a pretrained encoder as one object (frozen extractors, feature normalization, the
  fusion model) that embeds locations from any subset of their modalities;
- `errors`: `FieldError`, the one error the method raises for an input it cannot use.
"""
