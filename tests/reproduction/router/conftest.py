"""Shared by the router's reproductions: the MiniLM embedder, loaded once per session (one torch
thread for every test: tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def minilm():
    from paperworks.services.router.embed import minilm

    return minilm()
