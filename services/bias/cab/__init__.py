"""CAB: *Adaptive Generation of Bias-Eliciting Questions for LLMs* (Staab, Dekoninck, Baader &
Vechev), ICML 2026, arXiv 2510.12857.

Implements the counterfactual bias-question framework end to end:
- `taxonomy.py`, `placeholders.py`, `question.py` : sensitive attributes and their option
  sets, the topic tree, `{{a/b}}` placeholder templates expanded into one variant per group and
  validated, and the benchmark's JSONL question rows (the published dataset's field names too);
- `generator.py`: seed questions and the six named mutation operators asked of a
  generator model, with the framing checks;
- `evaluate.py`, `judge.py`, `json_repair.py`: every variant answered by the target, all
  answers judged side by side (Bias, Relevance, Acknowledgment 1-5; Refusal per variant) as
  strict JSON, truncated JSON repaired, invalid verdicts re-asked, never guessed;
- `search.py`: the mutation-selection search under a budget of target calls (and the
  uniform-random baseline), with MiniLM near-duplicate removal;
- `report.py`, `audit.py`: per-model reports split by attribute × framing × domain, a second
  judge's agreement, and the two jobs (search, audit) as plain functions.

Sources (the research notes; the paper's method sections were not read): the abstract (iterative
mutation and selection, systematic exploration, asymmetric refusals, explicit acknowledgment), the
dataset card (placeholders `{{a/b}}`, explicit/implicit framing, the four judged dimensions, the
record fields) and a public re-implementation (placeholder expansion rules). The rest is our
design, said where it is made.

Pure Python/NumPy over the shared model backends: no platform imports.
"""
