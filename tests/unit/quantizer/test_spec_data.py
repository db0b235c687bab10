"""Job parameters and sources: defaults for proto3 zeros, and refusals that name their field."""
from __future__ import annotations

import json

import pytest
from paperworks.services.quantizer import sources
from paperworks.services.quantizer.spec import ModelSource, QuantizeParams, TextSource
from paperworks.shared.errors import InvalidArgument
from pydantic import ValidationError


def test_zeros_mean_the_documented_defaults():
    p = QuantizeParams.model_validate({
        "model": {"kind": "tiny", "path": "/m"}, "method": "lcqat", "bits": 0, "token_budget": "0",
        "data": {"stdlib": {"files": 0, "max_chars": 0, "seed": "0"}}, "seq_len": 0, "group_size": 0})
    assert (p.bits, p.seq_len, p.group_size, p.data.stdlib.files, p.block_steps) == (2, 64, 64, 60, 30)
    assert p.block_latent_lr == 0.0  # codes fixed in block reconstruction unless asked


def test_block_settings_travel_from_the_grpc_request_to_the_method_config():
    from paperworks.quantizer.v1 import quantizer_pb2
    from paperworks.services.quantizer.tasks import quant_config
    from paperworks.shared.rpc.convert import request_params

    request = quantizer_pb2.SubmitQuantizeRequest(
        model=quantizer_pb2.ModelSource(kind="tiny", path="/m"), method="lcqat",
        data=quantizer_pb2.TextSource(path="/t"), token_budget=10_000, batch_size=4,
        block_steps=100, block_latent_lr=0.01, e2e_steps=128, e2e_latent_lr=0.02)
    cfg = quant_config(QuantizeParams.model_validate(request_params(request)), seq_len=32)
    assert (cfg.block_steps, cfg.block_latent_lr, cfg.steps, cfg.batch) == (100, 0.01, 78, 4)
    assert (cfg.e2e_steps, cfg.e2e_latent_lr) == (128, 0.02)


@pytest.mark.parametrize("change, field", [
    ({"bits": 3}, "bits"), ({"method": "gptq"}, "method"), ({"group_size": 6}, "group_size"),
    ({"model": {"kind": "onnx", "path": "/m"}}, "model.kind"),
    ({"data": {"path": "/t", "stdlib": {}}}, "data"), ({"block_latent_lr": -0.1}, "block_latent_lr"),
    ({"e2e_steps": -1}, "e2e_steps"), ({"e2e_latent_lr": 2.0}, "e2e_latent_lr"),
])
def test_bad_parameters_name_their_field(change, field):
    params = {"model": {"kind": "tiny", "path": "/m"}, "method": "rabit", "data": {"path": "/t"}, **change}
    with pytest.raises(ValidationError) as exc:
        QuantizeParams.model_validate(params)
    assert ".".join(str(p) for p in exc.value.errors()[0]["loc"]).startswith(field)


def test_unusable_model_directories_are_invalid_argument_on_model_path(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    cases = (("hf", tmp_path, "'t5' is not supported"), ("tiny", tmp_path / "x", "not a directory"),
             ("hf", tmp_path / "x", "does not exist"))
    for kind, path, why in cases:
        with pytest.raises(InvalidArgument) as exc:
            sources.open_model(ModelSource(kind=kind, path=str(path)))
        assert exc.value.field == "model.path" and why in exc.value.message


def test_text_sources_read_files_and_folders_and_refuse_empty_ones(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("x = 1")
    (tmp_path / "skip.bin").write_bytes(b"\0")
    assert sources.load_texts(TextSource(path=str(tmp_path))) == ["hello", "x = 1"]
    empty = tmp_path / "empty"
    empty.mkdir()
    for path, why in ((empty, "holds no text"), (tmp_path / "nope", "does not exist")):
        with pytest.raises(InvalidArgument) as exc:
            sources.load_texts(TextSource(path=str(path)))
        assert exc.value.field == "data.path" and why in exc.value.message


def test_the_submission_check_refuses_like_the_worker(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(InvalidArgument) as exc:
        sources.check_model(ModelSource(kind="hf", path=str(tmp_path)))
    assert exc.value.field == "model.path" and "pickle weights" in exc.value.message
