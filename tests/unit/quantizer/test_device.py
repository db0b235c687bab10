"""Where the quantizer runs: a job loads its model (and so calibrates, trains and evaluates) on
the job context's device, and the sync RPCs' packed models on the server's device. No GPU here:
a fake device name is recorded on its way to the backend, which then loads on the CPU."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from types import SimpleNamespace

import torch
from paperworks.services.quantizer import data, tasks
from paperworks.services.quantizer.spec import QuantizeParams
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder, save_tiny


class FakeContext:
    def __init__(self, device: str):
        self.device, self.artifacts, self.announced = device, {}, []

    def progress(self, *a, **k):
        pass

    def put_artifact(self, name, blob, media_type):
        self.artifacts[name] = blob
        return {"name": name, "sha256": hashlib.sha256(blob).hexdigest()}

    def put_json(self, name, obj):
        return self.put_artifact(name, json.dumps(obj).encode(), "application/json")

    def announce_model(self, artifact, message):
        self.announced.append(artifact)


def _recording(monkeypatch) -> list[str]:
    seen, load = [], data.load_backend

    def load_backend(ref):
        seen.append(ref.device)
        return load(dataclasses.replace(ref, device="cpu"))

    monkeypatch.setattr(data, "load_backend", load_backend)
    return seen


def test_a_quantize_job_loads_its_model_on_the_context_device(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = save_tiny(tmp_path / "m", TinyDecoder(TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64,
                                                             max_seq_len=32)))
    (tmp_path / "t.txt").write_text("def f(x):\n    return x + 1\n" * 200)
    seen = _recording(monkeypatch)
    params = QuantizeParams(model={"kind": "tiny", "path": str(model)}, method="rtn",
                            data={"path": str(tmp_path / "t.txt")}, seq_len=16, calibration_windows=2)
    result = tasks.run_quantize(params, FakeContext("cuda:3"))
    assert seen == ["cuda:3"] and result["bits_per_weight"] == 2.0
    assert result["bits_per_weight_with_scales"] > 2.0 and set(result["bits_per_weight_parts"]) == {
        "scale", "offset"}


def test_the_server_device_follows_the_settings(monkeypatch):
    import paperworks.shared.config as config

    monkeypatch.setattr(config, "get_settings", lambda: SimpleNamespace(device="cuda:1"))
    assert data.server_device() == "cuda:1"
    monkeypatch.setattr(config, "get_settings", lambda: SimpleNamespace(device=""))
    assert data.server_device() == ("cuda:0" if torch.cuda.is_available() else "cpu")
