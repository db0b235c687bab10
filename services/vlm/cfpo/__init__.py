"""CFPO: CounterFactual Policy Optimization for LVLM reinforcement learning (Yu, Sun, Yang, Wu, Lao;
arXiv 2606.23206, ICML 2026; code github.com/Raven-July/CFPO) with the baselines it is measured
against: GRPO, DAPO (clip-higher, dynamic sampling, no reference KL) and PAPO-style input-masking
perception loss (arXiv 2507.06448). `task` is the synthetic VQA with a language-prior shortcut;
`rl` the objectives and the training loop."""
