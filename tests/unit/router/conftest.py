"""Fixtures for the router's unit tests: one torch thread, a scripted remote, a small SDR policy."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def load_sibling(module: str, path: Path):
    """Import a helper file by path (--import-mode=importlib puts no test dir on sys.path)."""
    name = f"paperworks_tests_router_{module}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        spec.loader.exec_module(loaded)
    return sys.modules[name]


scripted_openai = load_sibling("scripted_openai", Path(__file__).with_name("scripted_openai.py"))


@pytest.fixture(scope="module")
def server():
    """A scripted remote (`solve_checkable`) on 127.0.0.1, shared by one test module."""
    s = scripted_openai.ScriptedOpenAI(scripted_openai.solve_checkable).start()
    yield s
    s.stop()
