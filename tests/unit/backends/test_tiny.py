"""The tiny decoder, its tokenizer, format, trainer and backend."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from paperworks.shared.backends import InvalidModel, InvalidRequest, ModelRef, load_backend
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.backends.tiny_data import generate_tasks, stdlib_texts
from paperworks.shared.backends.tiny_model import (
    ByteTokenizer,
    TinyConfig,
    TinyDecoder,
    load_tiny,
    save_tiny,
)
from paperworks.shared.backends.tiny_train import train_tiny_lm
from safetensors.torch import load_file, save_file

MICRO = TinyConfig(dim=16, n_layers=1, n_heads=2, mlp_hidden=32, max_seq_len=32)


@given(st.text())
def test_byte_tokenizer_round_trips_any_text(text):
    tok = ByteTokenizer()
    ids = tok.encode(text, add_eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.decode(ids) == text


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"dim": 30}, "config.dim"),
        ({"dim": 12, "n_heads": 4}, "config.n_heads"),
        ({"vocab_size": 10}, "config.vocab_size"),
    ],
)
def test_config_validation_names_the_field(change, field):
    with pytest.raises(InvalidModel) as info:
        TinyConfig(**{"dim": 32, "n_heads": 4, **change})
    assert info.value.field == field


def test_linear_layers_have_llama_names():
    names = {
        n.rsplit(".", 1)[-1] for n, m in TinyDecoder(MICRO).named_modules() if isinstance(m, torch.nn.Linear)
    }
    assert names == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
        "lm_head",
    }


def test_kv_cache_matches_full_forward():
    torch.manual_seed(0)
    model = TinyDecoder(MICRO).eval()
    ids = torch.randint(0, 256, (2, 12))
    full = model(ids).logits
    out = model(ids[:, :5], use_cache=True)
    steps = [out.logits]
    for chunk in (ids[:, 5:6], ids[:, 6:9], ids[:, 9:]):  # one token, then several at once
        out = model(chunk, out.cache, use_cache=True)
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)


def test_training_is_deterministic_and_learns():
    texts = [t.text for t in generate_tasks(300, seed=1)]
    a = train_tiny_lm(texts, MICRO, steps=30, seed=7, batch_size=4)
    b = train_tiny_lm(texts, MICRO, steps=30, seed=7, batch_size=4)
    c = train_tiny_lm(texts, MICRO, steps=30, seed=8, batch_size=4)
    for key, value in a.module.state_dict().items():
        assert torch.equal(value, b.module.state_dict()[key])
    assert a.losses == b.losses and a.losses != c.losses
    assert a.losses[-1] < a.losses[0] - 0.5


def test_training_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train_tiny_lm(["abc"], MICRO, steps=1, seed=0, batch_size=2)
    assert torch.equal(torch.rand(3), expected)


def test_trained_model_answers_with_eos(tiny_trained, tiny_backend):
    assert tiny_trained.losses[-1] < 1.6  # uniform over 259 symbols is 5.56
    tasks = generate_tasks(20, seed=5, kinds=("add",), max_digits=1)
    gens = tiny_backend.generate([t.prompt for t in tasks], max_new_tokens=6)
    assert all(g.finish_reason == "stop" and g.text.isdigit() for g in gens)
    assert sum(t.check(g.text) for t, g in zip(tasks, gens, strict=True)) >= 4


def test_save_load_round_trip(tiny_trained, tiny_dir):
    loaded = load_tiny(tiny_dir)
    ids = torch.tensor([[256, 51, 43, 52, 61]])
    torch.testing.assert_close(loaded(ids).logits, tiny_trained.module(ids).logits)
    assert load_backend(ModelRef(kind="tiny", path=str(tiny_dir))).module.config == loaded.config
    half = load_backend(ModelRef(kind="tiny", path=str(tiny_dir), dtype="bfloat16"))
    assert half.generate(["1+2="], max_new_tokens=3)[0].token_ids
    assert half.hidden_states(["1+2="])[0].states.dtype == torch.float32


def _corrupt(directory, what):
    if what == "no weights":
        (directory / "model.safetensors").unlink()
    elif what == "garbage weights":
        (directory / "model.safetensors").write_bytes(b"\x00" * 64)
    elif what == "missing tensor":
        state = load_file(directory / "model.safetensors")
        state.pop("lm_head.weight")
        save_file(state, directory / "model.safetensors")
    elif what == "wrong shape":
        config = json.loads((directory / "config.json").read_text())
        (directory / "config.json").write_text(json.dumps({**config, "mlp_hidden": 48}))
    elif what == "hf config":
        (directory / "config.json").write_text(json.dumps({"model_type": "llama"}))
    elif what == "bad json":
        (directory / "config.json").write_text("{")


@pytest.mark.parametrize(
    ("what", "says"),
    [
        ("no weights", "has no model.safetensors"),
        ("garbage weights", "not a readable safetensors file"),
        ("missing tensor", "missing ['lm_head.weight']"),
        ("wrong shape", "has shape"),
        ("hf config", "kind='hf'"),
        ("bad json", "not valid JSON"),
    ],
)
def test_broken_directories_say_why(tmp_path, what, says):
    save_tiny(tmp_path, TinyDecoder(MICRO))
    _corrupt(tmp_path, what)
    with pytest.raises(InvalidModel) as info:
        TinyBackend.from_dir(tmp_path)
    assert info.value.field == "path" and says in str(info.value)
    assert info.value.grpc_code_name == "INVALID_ARGUMENT"


def test_greedy_generation_agrees_with_score(tiny_backend):
    (gen,) = tiny_backend.generate(["3+4="], max_new_tokens=5)
    (score,) = tiny_backend.score(["3+4="], [gen.text])
    assert score.token_ids == gen.token_ids
    assert score.total == pytest.approx(gen.total_logprob, abs=1e-4)
    assert score.entropies == pytest.approx(gen.entropies, abs=1e-4)


def test_sampling_is_seeded(tiny_backend):
    def sample(seed):
        return [
            g.text for g in tiny_backend.generate(["1+", "2+"], temperature=1.5, seed=seed, max_new_tokens=8)
        ]

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)
    greedy = tiny_backend.generate(["1+"], max_new_tokens=8)[0].text
    assert (
        tiny_backend.generate(["1+"], temperature=1.0, top_p=1e-6, seed=3, max_new_tokens=8)[0].text == greedy
    )


def test_stop_strings_cut_the_text(tiny_backend):
    (gen,) = tiny_backend.generate([""], max_new_tokens=30, temperature=1.0, seed=0, stop=["+"])
    assert "+" not in gen.text


def test_hidden_states_shape_and_padding_invariance(tiny_backend):
    config = tiny_backend.module.config
    texts = ["1+2=", "7+8=15 and then more text"]
    batch = tiny_backend.hidden_states(texts)
    single = tiny_backend.hidden_states(texts[:1])[0]
    assert batch[0].states.shape == (config.n_layers + 1, 5, config.dim)
    torch.testing.assert_close(batch[0].states, single.states, atol=1e-5, rtol=1e-4)
    (pair,) = tiny_backend.hidden_states(["1+2="], ["3"], layers=[-1])
    assert pair.layers == (config.n_layers,) and pair.prefix_len == 5
    torch.testing.assert_close(pair.last("prefix"), single.states[-1:, -1])
    assert pair.mean("continuation").shape == (1, config.dim)
    with pytest.raises(InvalidRequest):
        single.mean("continuation")


def test_context_overflow_is_a_precise_error(tiny_backend):
    with pytest.raises(InvalidRequest) as info:
        tiny_backend.score(["x" * 100], ["y"])
    assert info.value.field == "continuations" and "context of 64" in str(info.value)
    with pytest.raises(InvalidRequest, match="no room"):
        tiny_backend.generate(["x" * 70])
    (gen,) = tiny_backend.generate(["x" * 60], max_new_tokens=50, temperature=1.0, seed=0)
    assert len(gen.token_ids) <= 3


def test_argument_errors_name_the_field(tiny_backend):
    for call, field in [
        (lambda: tiny_backend.generate("a prompt"), "prompts"),
        (lambda: tiny_backend.score(["a"], ["b", "c"]), "continuations"),
        (lambda: tiny_backend.generate(["a"], temperature=-1), "temperature"),
        (lambda: tiny_backend.chat([{"role": "robot", "content": "x"}]), "messages[0]"),
        (lambda: tiny_backend.hidden_states(["a"], layers=[9]), "layers"),
        (lambda: tiny_backend.generate(["a"], stop="\n"), "stop"),
    ]:
        with pytest.raises(InvalidRequest) as info:
            call()
        assert info.value.field == field


def test_chat_renders_plain_roles(tiny_backend):
    answer = tiny_backend.chat([{"role": "user", "content": "2+2="}], max_new_tokens=4, logprobs=True)
    assert answer.finish_reason in ("stop", "length") and len(answer.logprobs) == len(answer.token_ids)


def test_swapped_linear_layers_are_used(tiny_dir):
    backend = TinyBackend.from_dir(tiny_dir)
    before = backend.score(["1+1="], ["2"])[0].total
    for block in backend.module.layers:
        block.mlp.down_proj = torch.nn.Linear(
            block.mlp.down_proj.in_features, block.mlp.down_proj.out_features, bias=False
        )
    assert backend.score(["1+1="], ["2"])[0].total != pytest.approx(before)
    logp = backend.token_logprobs(torch.tensor([backend.encode("1+1=2")]))
    assert logp.shape == (1, 5) and logp[0, -1].item() == pytest.approx(
        backend.score(["1+1="], ["2"])[0].total, abs=1e-5
    )


def test_generated_data_is_deterministic():
    assert generate_tasks(50, seed=3) == generate_tasks(50, seed=3) != generate_tasks(50, seed=4)
    task = generate_tasks(1, seed=0, kinds=("sort",))[0]
    assert task.check(" " + "".join(sorted(task.prompt[5:-1])) + "\n")
    texts = stdlib_texts(max_files=5, max_chars=100, seed=1)
    assert texts == stdlib_texts(max_files=5, max_chars=100, seed=1)
    assert len(texts) == 5 and all(0 < len(t) <= 100 for t in texts)
    with pytest.raises(ValueError):
        generate_tasks(1, seed=0, kinds=("multiply",))
