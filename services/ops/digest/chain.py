"""A seeded SHA-256 chain: deterministic, CPU-bound work whose result anyone can recompute.

state_0 = sha256(seed as 8 little-endian bytes); each step applies sha256
`rounds_per_step` times and records the state as a checkpoint. Not a method of
any paper: it exists so the platform can be tested and benchmarked on real work.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable


def digest_chain(
    seed: int,
    steps: int,
    rounds_per_step: int,
    on_step: Callable[[int, str], None] | None = None,
) -> list[str]:
    """Returns the checkpoint after every step; the last one is the digest."""
    state = hashlib.sha256(seed.to_bytes(8, "little")).digest()
    checkpoints = []
    for step in range(1, steps + 1):
        for _ in range(rounds_per_step):
            state = hashlib.sha256(state).digest()
        checkpoints.append(state.hex())
        if on_step is not None:
            on_step(step, checkpoints[-1])
    return checkpoints
