"""The hf backend on tiny GPT-2 and Llama models saved locally, and its directory checks."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from paperworks.shared.backends import InvalidModel, ModelRef, load_backend
from paperworks.shared.backends.hf import TESTED_MODEL_TYPES, HFBackend
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder, save_tiny
from safetensors.torch import load_file, save_file
from unit.backends.hf_models import FAMILY_CONFIGS, save_family


@pytest.fixture
def hf(hf_dir) -> HFBackend:
    return HFBackend.from_dir(hf_dir)


def test_greedy_generation_agrees_with_score_and_transformers_generate(hf):
    prompt = "hello"
    (gen,) = hf.generate([prompt], max_new_tokens=10)
    assert len(gen.token_ids) == len(gen.logprobs) == 10 and gen.finish_reason == "length"
    prompt_ids = hf.encode(prompt)
    (score,) = hf.score_ids([prompt_ids], [gen.token_ids])
    assert score.total == pytest.approx(gen.total_logprob, abs=1e-4)
    assert score.entropies == pytest.approx(gen.entropies, abs=1e-4)
    assert _greedy_reference(hf, prompt_ids, 10) == gen.token_ids


def test_text_score_matches_token_score(hf):
    (by_text,) = hf.score(["2+2="], ["4 ok"])
    (by_ids,) = hf.score_ids([hf.encode("2+2=")], [hf.encode("4 ok", add_special=False)])
    assert by_text.logprobs == pytest.approx(by_ids.logprobs)
    assert by_text.tokens == list("4 ok")


def test_hidden_states_match_the_model_and_ignore_padding(hf):
    n_layers, hidden = hf.module.config.num_hidden_layers, hf.module.config.hidden_size
    short, long = hf.hidden_states(["abc", "abcdefgh"])
    expected_len = len(hf.encode("abc"))
    assert short.states.shape == (n_layers + 1, expected_len, hidden)
    direct = hf.module(torch.tensor([hf.encode("abc")]), output_hidden_states=True).hidden_states
    torch.testing.assert_close(short.states, torch.cat(direct).detach(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(long.states[:, :expected_len], short.states, atol=1e-5, rtol=1e-4)
    (pair,) = hf.hidden_states(["abc"], ["de"], layers=[0, -1])
    assert pair.layers == (0, n_layers) and pair.span("continuation").shape == (2, 2, hidden)


def _greedy_reference(backend, ids, n):
    out = backend.module.generate(
        torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=258
    )
    return out[0, len(ids) :].tolist()


def test_chat_uses_the_tokenizer_template_when_present(llama_dir, gpt2_dir):
    messages = [{"role": "user", "content": "hi"}]
    llama = HFBackend.from_dir(llama_dir)
    rendered = llama.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == "<s><|user|>hi\n<|assistant|>"
    ids = llama.encode(rendered, add_special=False)
    assert ids.count(256) == 1
    assert llama.chat(messages, max_new_tokens=4).token_ids == _greedy_reference(llama, ids, 4)
    gpt2 = HFBackend.from_dir(gpt2_dir)  # no template: plain "role: content" lines
    ids = gpt2.encode("user: hi\nassistant:")
    assert gpt2.chat(messages, max_new_tokens=4).token_ids == _greedy_reference(gpt2, ids, 4)


def test_empty_prompt_starts_from_bos_or_eos(hf):
    (gen,) = hf.generate([""], max_new_tokens=3)
    assert len(gen.token_ids) == 3


def test_load_backend_and_module_access(hf_dir):
    backend = load_backend(ModelRef(kind="hf", path=str(hf_dir), dtype="bfloat16"))
    assert isinstance(backend.module, torch.nn.Module) and backend.module.dtype == torch.bfloat16
    assert backend.supports("hidden_states") and backend.tokenizer.eos_token_id == 257
    assert backend.generate(["ab"], max_new_tokens=2)[0].token_ids


def _break(directory, what):
    if what == "no config":
        (directory / "config.json").unlink()
    elif what == "bad json":
        (directory / "config.json").write_text("{not json")
    elif what == "t5":
        config = json.loads((directory / "config.json").read_text())
        (directory / "config.json").write_text(json.dumps({**config, "model_type": "t5"}))
    elif what == "pickle only":
        (directory / "model.safetensors").rename(directory / "pytorch_model.bin")
    elif what == "no tokenizer":
        (directory / "tokenizer.json").unlink()
    elif what == "missing tensor":
        state = load_file(directory / "model.safetensors")
        state.pop(sorted(k for k in state if "layers.1" in k or ".h.1." in k)[0])
        save_file(state, directory / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize(
    ("what", "says"),
    [
        ("no config", "has no config.json"),
        ("bad json", "not valid JSON"),
        ("t5", "model_type 't5' is not a causal language model transformers can load"),
        ("pickle only", "pickle weights (pytorch_model.bin) are never loaded"),
        ("no tokenizer", "has no tokenizer"),
        ("missing tensor", "weights do not match config.json"),
    ],
)
def test_unusable_directories_say_why(hf_dir, tmp_path, what, says):
    directory = tmp_path / "model"
    shutil.copytree(hf_dir, directory)
    _break(directory, what)
    with pytest.raises(InvalidModel) as info:
        load_backend(ModelRef(kind="hf", path=str(directory)))
    assert info.value.field == "path" and info.value.grpc_code_name == "INVALID_ARGUMENT"
    assert says in str(info.value)


def test_missing_paths_and_tiny_dirs_are_rejected(tmp_path):
    with pytest.raises(InvalidModel, match="does not exist"):
        HFBackend.from_dir(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidModel, match="is not a directory"):
        HFBackend.from_dir(tmp_path / "file")
    tiny = save_tiny(tmp_path / "tiny", TinyDecoder(TinyConfig(dim=16, n_heads=2, n_layers=1, mlp_hidden=16)))
    with pytest.raises(InvalidModel, match="kind='tiny'"):
        HFBackend.from_dir(tiny)


@pytest.mark.parametrize("model_type", sorted(FAMILY_CONFIGS))
def test_other_transformers_families_load_generate_and_score(tmp_path, model_type):
    """The families TESTED_MODEL_TYPES names beyond llama and gpt2, each built from its config."""
    assert model_type in TESTED_MODEL_TYPES
    directory = save_family(tmp_path / model_type, model_type)
    with load_backend(ModelRef(kind="hf", path=str(directory))) as backend:
        [gen] = backend.generate(["abc"], max_new_tokens=3, logprobs=True)
        [score] = backend.score(["abc"], ["de"])
    assert len(gen.token_ids) == 3 and len(gen.logprobs) == 3
    assert score.total < 0 and len(score.logprobs) == 2
