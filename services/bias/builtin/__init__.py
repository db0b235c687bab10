"""Models defined in code: a target with planted biases, a MiniLM+lexicon judge, a template generator."""
