"""Cornstarch (Jang et al., "Efficient Distributed MLLM Training with Cornstarch", ICML 2026,
arXiv 2503.11367) in miniature, pure PyTorch on torch.distributed:

- `model`: multimodal composition (encoders + projectors scattered into a decoder LM's placeholder
  positions) with per-module freeze flags and LoRA;
- `costs`: the per-layer cost model measured by profiling (forward, backward with weight gradients,
  input-gradient-only backward);
- `schedule`: the multimodal 1F1B schedule over the encoder-branches -> LLM stage DAG and its simulator;
- `partition`: the frozen-aware partitioner and the frozen-unaware baselines;
- `pipeline`: the schedule run for real with point-to-point sends between processes;
- `context`: the multimodal attention mask, the workload-balanced (LPT) context-parallel split and ring
  attention over torch.distributed;
- `launch` / `worker`: the process launcher (rendezvous on 127.0.0.1) and the per-rank entry point.
"""
