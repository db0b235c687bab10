"""CAB (arXiv 2510.12857): counterfactual bias questions, their search, judging and reports."""
