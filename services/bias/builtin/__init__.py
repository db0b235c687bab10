"""Models defined in code, named in a job as `{"kind": "builtin", "builtin": ...}`: a target with
planted biases (`planted_target.py`), a MiniLM+lexicon judge (`lexicon_judge.py`) and a template
generator (`template_generator.py`). They are stand-ins so CAB's search can be scored against
ground truth, not the papers' LLMs. No platform imports.
"""
