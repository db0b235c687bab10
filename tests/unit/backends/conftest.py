"""Fixtures: a live fake OpenAI server, a trained tiny model, tiny GPT-2 / Llama directories.

Everything is built here from code: no hub access (HF_HUB_OFFLINE is set before transformers
can be imported), no downloaded tokenizer, no network beyond 127.0.0.1.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import importlib.util
import sys
from pathlib import Path

import pytest
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.backends.tiny_data import generate_tasks
from paperworks.shared.backends.tiny_model import TinyConfig, save_tiny
from paperworks.shared.backends.tiny_train import train_tiny_lm
from unit.backends.hf_models import save_gpt2, save_llama

SMALL = TinyConfig(dim=64, n_layers=2, n_heads=4, mlp_hidden=176, max_seq_len=64)
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _load_fake_openai():
    """Import the sibling fake_openai.py (--import-mode=importlib puts no test dir on sys.path)."""
    name = "paperworks_tests_fake_openai"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("fake_openai.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while being defined
        spec.loader.exec_module(module)
    return sys.modules[name]


fake_openai = _load_fake_openai()




@pytest.fixture
def openai_server():
    server = fake_openai.FakeOpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tiny_trained():
    """A small decoder trained briefly on one-digit additions (a few seconds on 2 cores)."""
    tasks = generate_tasks(3000, seed=0, kinds=("add",), max_digits=1)
    return train_tiny_lm([t.text for t in tasks], SMALL, steps=150, seed=0, batch_size=16)


@pytest.fixture(scope="session")
def tiny_dir(tiny_trained, tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("tiny"), tiny_trained.module)


@pytest.fixture
def tiny_backend(tiny_dir) -> TinyBackend:
    return TinyBackend.from_dir(tiny_dir)


@pytest.fixture(scope="session")
def gpt2_dir(tmp_path_factory) -> Path:
    return save_gpt2(tmp_path_factory.mktemp("gpt2"))


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory) -> Path:
    return save_llama(tmp_path_factory.mktemp("llama"), chat_template=CHAT_TEMPLATE)


@pytest.fixture(params=["gpt2", "llama"])
def hf_dir(request) -> Path:
    return request.getfixturevalue(f"{request.param}_dir")
