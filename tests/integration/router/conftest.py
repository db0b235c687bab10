"""The embedded stack running the router, and a scripted remote reachable from its worker."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from support import service_fixtures

HELPERS = Path(__file__).resolve().parents[2] / "unit" / "router"


def _load(name: str):
    """Import a helper of the unit tests by path (--import-mode=importlib)."""
    module_name = f"paperworks_tests_router_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, HELPERS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


stack, client = service_fixtures("router")


@pytest.fixture(scope="module")
def remote():
    """A scripted OpenAI-compatible remote (right on add/upper, wrong on lookups)."""
    scripted = _load("scripted_openai")
    server = scripted.ScriptedOpenAI(scripted.solve_checkable).start()
    yield server
    server.stop()
