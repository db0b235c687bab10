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
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.backends.tiny_data import generate_tasks
from paperworks.shared.backends.tiny_model import TinyConfig, save_tiny
from paperworks.shared.backends.tiny_train import train_tiny_lm

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


@contextmanager
def one_thread():
    """Tiny models gain nothing from intra-op threads, and on a shared 2-core machine OpenMP
    spinning makes them several times slower; restore the setting for tests elsewhere."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


@pytest.fixture
def openai_server():
    server = fake_openai.FakeOpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tiny_trained():
    """A small decoder trained briefly on one-digit additions (a few seconds on 2 cores)."""
    tasks = generate_tasks(3000, seed=0, kinds=("add",), max_digits=1)
    with one_thread():
        return train_tiny_lm([t.text for t in tasks], SMALL, steps=150, seed=0, batch_size=16)


@pytest.fixture(scope="session")
def tiny_dir(tiny_trained, tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("tiny"), tiny_trained.module)


@pytest.fixture
def tiny_backend(tiny_dir) -> TinyBackend:
    return TinyBackend.from_dir(tiny_dir)


def byte_tokenizer(*, add_bos: bool):
    """A byte-level tokenizer (256 bytes + <s> </s> <pad>) built in code, as transformers wraps it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    specials = ["<s>", "</s>", "<pad>"]
    vocab.update({s: len(vocab) + i for i, s in enumerate(specials)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", vocab["<s>"])]
        )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def _save_hf(directory: Path, model, tokenizer) -> Path:
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def gpt2_dir(tmp_path_factory) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=259, n_embd=32, n_layer=2, n_head=4, n_positions=64,
        bos_token_id=256, eos_token_id=257,
    )  # fmt: skip
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    return _save_hf(tmp_path_factory.mktemp("gpt2"), model, byte_tokenizer(add_bos=False))


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=259, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=256, eos_token_id=257, pad_token_id=258,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    tokenizer = byte_tokenizer(add_bos=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    return _save_hf(tmp_path_factory.mktemp("llama"), model, tokenizer)


@pytest.fixture(params=["gpt2", "llama"])
def hf_dir(request) -> Path:
    return request.getfixturevalue(f"{request.param}_dir")
