"""Shared by the router's reproductions: one torch thread (tiny models on a shared 2-core machine)
and the MiniLM embedder, loaded once per session."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Module-scoped so it is in force before the module-scoped `results` fixtures that do the
    training (a function-scoped one only started after them, leaving them on every thread of a
    shared machine: the same synthetic run took 21 s or 232 s depending on load)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def minilm():
    from paperworks.services.router.embed import minilm

    return minilm()
