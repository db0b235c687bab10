"""Job parameters and inputs: defaults for unset fields, and refusals that name their field."""
from __future__ import annotations

import json

import pytest
from paperworks.quantizer.v1 import quantizer_pb2
from paperworks.services.quantizer import data
from paperworks.services.quantizer.spec import LocalModelSpec, QuantizeParams, TextSource
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.rpc.convert import request_params
from paperworks.v1 import common_pb2
from pydantic import ValidationError


def _request(**fields) -> quantizer_pb2.SubmitQuantizeRequest:
    return quantizer_pb2.SubmitQuantizeRequest(
        model=common_pb2.ModelSpec(kind="tiny", path="/m"), method="lcqat",
        data=quantizer_pb2.TextSource(stdlib=quantizer_pb2.StdlibText()), **fields)


def test_unset_fields_take_the_documented_defaults():
    p = QuantizeParams.model_validate(request_params(_request()))
    assert (p.bits, p.seq_len, p.group_size, p.data.stdlib.files, p.block_steps) == (2, 64, 64, 60, 30)
    assert (p.calibration_windows, p.batch_size, p.learning_rate, p.init_sweeps) == (16, 8, 3e-4, 50)
    assert (p.token_budget, p.data.stdlib.max_chars, p.hidden_weight) == (0, 8000, 1.0)
    assert p.block_latent_lr == 0.0  # codes fixed in block reconstruction unless asked
    assert (p.model.kind, p.model.path) == ("tiny", "/m")


@pytest.mark.parametrize("field", ["seq_len", "batch_size", "bits", "group_size", "learning_rate"])
def test_an_explicit_zero_is_a_value_and_refused_where_out_of_range(field):
    with pytest.raises(ValidationError) as exc:
        QuantizeParams.model_validate(request_params(_request(**{field: 0})))
    refusal = violations_from_pydantic(exc.value)
    assert isinstance(refusal, InvalidArgument) and refusal.field == field


def test_block_settings_travel_from_the_grpc_request_to_the_method_config():
    from paperworks.services.quantizer.tasks import quant_config

    request = quantizer_pb2.SubmitQuantizeRequest(
        model=common_pb2.ModelSpec(kind="tiny", path="/m"), method="lcqat",
        data=quantizer_pb2.TextSource(path="/t"), token_budget=10_000, batch_size=4,
        block_steps=100, block_latent_lr=0.01, e2e_steps=128, e2e_latent_lr=0.02)
    cfg = quant_config(QuantizeParams.model_validate(request_params(request)), seq_len=32)
    assert (cfg.block_steps, cfg.block_latent_lr, cfg.steps, cfg.batch) == (100, 0.01, 78, 4)
    assert (cfg.e2e_steps, cfg.e2e_latent_lr) == (128, 0.02)


@pytest.mark.parametrize("change, field", [
    ({"bits": 3}, "bits"), ({"method": "gptq"}, "method"), ({"group_size": 6}, "group_size"),
    ({"model": {"kind": "onnx", "path": "/m"}}, "model.kind"),
    ({"data": {"path": "/t", "stdlib": {}}}, "data"), ({"data": {}}, "data"),
    ({"model": {"kind": "tiny"}}, "model.source"),
    ({"data": {"source": {"upload": "x"}}}, "data.source.upload"),
    ({"model": {"kind": "hf", "path": "/a", "source": {"path": "/b"}}}, "model"),
    ({"block_latent_lr": -0.1}, "block_latent_lr"),
    ({"e2e_steps": -1}, "e2e_steps"), ({"e2e_latent_lr": 2.0}, "e2e_latent_lr"),
])
def test_bad_parameters_name_their_field(change, field):
    params = {"model": {"kind": "tiny", "path": "/m"}, "method": "rabit", "data": {"path": "/t"}, **change}
    with pytest.raises(ValidationError) as exc:
        QuantizeParams.model_validate(params)
    assert ".".join(str(p) for p in exc.value.errors()[0]["loc"]).startswith(field)


def test_path_is_short_for_source_path():
    p = QuantizeParams.model_validate({"model": {"kind": "tiny", "path": "/m"}, "method": "rtn",
                                       "data": {"path": "/t"}})
    assert (p.model.source.path, p.data.source.path, p.data.path) == ("/m", "/t", "/t")
    sha = "a" * 64
    p = QuantizeParams.model_validate({"model": {"kind": "hf", "source": {"upload": sha}}, "method": "rtn",
                                       "data": {"source": {"upload": sha}}})
    assert (p.model.source.upload, p.model.path, p.data.path) == (sha, "", "")


def test_unusable_model_directories_are_invalid_argument_on_model_path(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    cases = (("hf", tmp_path, "'t5' is not a causal language model"),
             ("tiny", tmp_path / "x", "not a directory"),
             ("hf", tmp_path / "x", "does not exist"))
    for kind, path, why in cases:
        with pytest.raises(InvalidArgument) as exc:
            data.open_model(LocalModelSpec(kind=kind, path=str(path)), None)
        assert exc.value.field == "model.source.path" and why in exc.value.message


def test_text_sources_read_files_and_folders_and_refuse_empty_ones(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("x = 1")
    (tmp_path / "skip.bin").write_bytes(b"\0")
    assert data.load_texts(TextSource(path=str(tmp_path)), None) == ["hello", "x = 1"]
    empty = tmp_path / "empty"
    empty.mkdir()
    for path, why in ((empty, "holds no text"), (tmp_path / "nope", "does not exist")):
        with pytest.raises(InvalidArgument) as exc:
            data.load_texts(TextSource(path=str(path)), None)
        assert exc.value.field == "data.source.path" and why in exc.value.message


def test_the_submission_check_refuses_like_the_worker(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(InvalidArgument) as exc:
        data.check_model(LocalModelSpec(kind="hf", path=str(tmp_path)), None)
    assert exc.value.field == "model.source.path" and "pickle weights" in exc.value.message


def test_server_paths_must_lie_under_the_data_root_when_one_is_set(tmp_path, monkeypatch):
    root, outside = tmp_path / "root", tmp_path / "outside"
    for folder in (root, outside):
        folder.mkdir()
        (folder / "a.txt").write_text("hello")
    monkeypatch.setenv("PAPERWORKS_QUANTIZER_DATA_ROOT", str(root))
    assert data.load_texts(TextSource(path=str(root)), None) == ["hello"]
    refusals = ((data.load_texts, TextSource(path=str(outside)), "data.source.path"),
                (data.open_model, LocalModelSpec(kind="tiny", path=str(outside)), "model.source.path"),
                (data.check_model, LocalModelSpec(kind="hf", path=str(outside)), "model.source.path"))
    for call, source, field in refusals:
        with pytest.raises(InvalidArgument) as exc:
            call(source, None)
        assert exc.value.field == field and "PAPERWORKS_QUANTIZER_DATA_ROOT" in exc.value.message


def test_a_path_the_os_cannot_take_is_invalid_argument():
    with pytest.raises(InvalidArgument) as exc:
        data.text_path(TextSource(path="a\0b"), None)
    assert exc.value.field == "data.source.path"
