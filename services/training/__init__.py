"""Cornstarch: frozen-aware pipeline parallelism and workload-balanced context parallelism for
multimodal LLM training, on torch.distributed."""
