"""SpatioLM: a plug-and-play, non-invasive spatio-vision module with pseudo depth and camera
supervision (Jing Wu, ..., Long Chen; arXiv 2608.01899, ICML 2026; code
github.com/xiaomi-research/spatio-lm). `world` is the numpy ray-caster world (images, depth, ray
maps), `qa` the spatial and general QA items, `model` the student VLM with the zero-initialised
branch and the DPT-style head, `losses` the depth / ray / relational-token / LM losses and their
0.6 / 0.2 / 0.1 / 0.1 mix, `train` the teacher, the four compared arms and their evaluation."""
