"""Shared fixtures of the bias reproductions: one MiniLM per session (one CPU thread: tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def embedder():
    from paperworks.services.bias.embedder import get_embedder

    return get_embedder()
