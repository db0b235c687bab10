"""The bias unit tests' one MiniLM per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def embedder():
    from paperworks.services.bias.embedder import get_embedder

    return get_embedder()
