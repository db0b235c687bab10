"""ABCD: *All Biases Come Disguised* (Nowak, Cadet & Chin), ICML 2026, arXiv 2602.17445:
bias-reduced multiple-choice evaluation.

Implements:
- `render.py`: the standard lettered prompt and Matched-and-Dashed (M&D, every option
  labelled with the same dash, answers written out in full), and the option permutations both
  are evaluated over;
- `match.py`: a response mapped to an option, a letter for the standard format, the
  sentence-similarity nearest option (with its margin) for M&D;
- `evaluate.py`, `audit.py`: both protocols over every permutation, with few-shot demos
  and the answer-moving attack; accuracy per permutation and its variance, selection histograms,
  demo-majority agreement, and the variance ratio standard / M&D;
- `nonsenseqa.py`: MCQ items and NonsenseQA, questions of random words whose golds are
  spread evenly over the positions, so no label, position or few-shot cue is informative.

Sources (the research notes; the paper's method sections were not read): the abstract and project
page (uniform dash labels, whole-answer output, sentence-similarity matching, NonsenseQA, the
answer-moving attack) and third-party summaries (the name Matched-and-Dashed, the variance
claim, that M&D does not remove position bias). Metric details are our design.

Pure Python/NumPy over the shared model backends: no platform imports.
"""
