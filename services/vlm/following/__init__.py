"""Modality following in MLLMs (Zhang et al., "When Modalities Conflict: How Unimodal Reasoning
Uncertainty Governs Preference Dynamics in MLLMs", arXiv 2511.02243; ICML 2026): the controllable
conflict set (`conflicts`), unimodal uncertainty, the following curve and balance point, layer-wise
oscillations (`audit`), and boundary-case SFT steering (`steer`)."""
