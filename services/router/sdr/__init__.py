"""Selective Deferred Routing (SDR): a local small LM first, one remote LLM on demand.

ICML 2026 (poster 65582; OpenReview uSMttGgyuZ). A local SLM answers every request and yields
rich representations of it; a lightweight decision module either adopts the local answer or
routes the request, in one step, to the most suitable remote LLM, trading monetary cost against
quality. Implemented here: the local LM's answers and routing features (`local_lm`), remote
agents, simulated or real (`remotes`), traces on checkable tasks (`traces`), the decision module
with one quality head per option and its lambda calibration (`decider`), and the evaluation
against baselines on normalised cost-quality areas (`curves`, `evaluation`).
Pure PyTorch / NumPy: no platform imports.
"""
