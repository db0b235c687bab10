"""What threads in one process must agree on: torch's intra-op thread count, and one
transformers model load or construction at a time.

Tiny models gain nothing from intra-op threads, and on a shared 2-core machine OpenMP
spinning makes them several times slower; their numbers then also stop depending on the
machine's core count. The previous setting comes back afterwards.

transformers' `from_pretrained` swaps class-wide methods (`PreTrainedModel.tie_weights`,
`init_weights`, torch's init functions) for no-ops while it loads and puts back what it found
afterwards. Two threads loading at once can each find the other's no-op and put it back, so it
stays for good: from then on every model the process builds or loads comes out untied, a tied
checkpoint's output head left at random values (reproduced with transformers 5.25 by two threads
loading a small Qwen2 folder; tests/unit/backends/test_hf_concurrent_loads.py). One process here
serves every service's sync calls from a pool of threads, so every transformers model load and
construction in paperworks holds `TRANSFORMERS_LOCK`.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

TRANSFORMERS_LOCK = threading.RLock()  # reentrant: a load may build a model inside another's hold


@contextmanager
def single_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
