"""Shared fixtures of the bias reproductions: one MiniLM per session, one CPU thread."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """Tiny models on a small shared CPU run faster on one thread (and deterministically)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def embedder():
    from paperworks.services.bias.embedder import get_embedder

    return get_embedder()
