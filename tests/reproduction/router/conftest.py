"""Shared by the router's reproductions: one torch thread (tiny models on a shared 2-core machine)
and the MiniLM embedder, loaded once per session."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def minilm():
    from paperworks.services.router.embed import minilm

    return minilm()
