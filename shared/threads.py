"""Torch's intra-op thread count, pinned for a block of work.

Tiny models gain nothing from intra-op threads, and on a shared 2-core machine OpenMP
spinning makes them several times slower; their numbers then also stop depending on the
machine's core count. The previous setting comes back afterwards.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def single_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
