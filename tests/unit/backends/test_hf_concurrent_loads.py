"""Concurrent transformers loads in one process (the servers process answers sync calls from a
pool of threads): without `TRANSFORMERS_LOCK`, two threads inside `from_pretrained` at once can
leave its no-op stand-ins for `PreTrainedModel.tie_weights` / `init_weights` in place, and every
model built afterwards in the process comes out untied (see paperworks.shared.threads)."""
from __future__ import annotations

import threading

import pytest
from paperworks.shared.backends.hf import load_pretrained
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel
from transformers.modeling_utils import PreTrainedModel
from unit.backends.hf_models import save_gpt2

THREADS, LOADS = 2, 30  # without the lock: the methods stayed swapped in 5 runs out of 5


def test_loads_from_threads_leave_transformers_as_they_found_it(tmp_path):
    folder = save_gpt2(tmp_path / "gpt2")
    methods = (PreTrainedModel.tie_weights, PreTrainedModel.init_weights)
    errors: list[BaseException] = []

    def load():
        try:
            for _ in range(LOADS):
                model, _ = load_pretrained(AutoModelForCausalLM, folder)
                assert model.lm_head.weight is model.transformer.wte.weight
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert (PreTrainedModel.tie_weights, PreTrainedModel.init_weights) == methods
    fresh = GPT2LMHeadModel(GPT2Config(vocab_size=16, n_embd=8, n_layer=1, n_head=2, n_positions=8))
    assert fresh.lm_head.weight is fresh.transformer.wte.weight


@pytest.fixture(autouse=True)
def _restore_transformers():
    """A failure here must not leave the worker process's transformers broken for later tests."""
    methods = (PreTrainedModel.tie_weights, PreTrainedModel.init_weights)
    yield
    PreTrainedModel.tie_weights, PreTrainedModel.init_weights = methods
