"""UrbanFusion (arXiv 2510.13774): location representations by stochastic multimodal fusion."""
