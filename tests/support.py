"""Helpers the test modules share (fixtures live in conftest.py)."""
from __future__ import annotations

import hashlib

TOKENS = {"alice": "alice-token", "bob": "bob-token"}


def chain(seed: int, steps: int, rounds: int) -> list[str]:
    """Recomputes the ops digest independently of the service."""
    state = hashlib.sha256(seed.to_bytes(8, "little")).digest()
    out = []
    for _ in range(steps):
        for _ in range(rounds):
            state = hashlib.sha256(state).digest()
        out.append(state.hex())
    return out
