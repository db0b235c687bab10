"""Where the quantizer runs: a job loads its model, calibrates, trains and evaluates on the job
context's device, and the sync RPCs' packed models live on the server's device. No GPU here: a
device name the machine lacks is recorded on its way to the backend and the method (which then
run on the CPU); the method itself moves model and batches to the device it is given (shown on
the meta device); QAT and packed inference under bf16 autocast (CUDA's mixed precision, run
here with CPU autocast) agree with float32 within stated tolerances."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from types import SimpleNamespace

import pytest
import torch
from paperworks.services.quantizer import data, quantize, tasks
from paperworks.services.quantizer.distill import TokenData
from paperworks.services.quantizer.linears import device_of, forward
from paperworks.services.quantizer.spec import QuantizeParams
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder, save_tiny

CONFIG = TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=32)


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


@pytest.fixture
def job(tmp_path) -> QuantizeParams:
    torch.manual_seed(0)
    model = save_tiny(tmp_path / "m", TinyDecoder(CONFIG))
    (tmp_path / "t.txt").write_text("def f(x):\n    return x + 1\n" * 200)
    return QuantizeParams(model={"kind": "tiny", "path": str(model)}, method="rtn",
                          data={"path": str(tmp_path / "t.txt")}, seq_len=16, calibration_windows=2)


def _recording(monkeypatch) -> dict[str, list]:
    """Records the device the handler asks for at each step, then runs that step on the CPU."""
    seen: dict[str, list] = {"load": [], "quantize": [], "amp": [], "placed": []}
    load, run = data.load_backend, quantize.quantize

    def load_backend(ref):
        seen["load"].append(ref.device)
        return load(dataclasses.replace(ref, device="cpu"))

    def quantize_on_cpu(teacher, tokens, cfg, progress, *, device, amp):
        seen["quantize"].append(device)
        seen["amp"].append(amp())
        student, info = run(teacher, tokens, cfg, progress, device="cpu")
        seen["placed"].append({device_of(student).type, tokens.to("cpu").train.device.type})
        return student, info

    monkeypatch.setattr(data, "load_backend", load_backend)
    monkeypatch.setattr(quantize, "quantize", quantize_on_cpu)
    return seen


@pytest.mark.filterwarnings("ignore:CUDA is not available")
@pytest.mark.parametrize("device", ["cpu", "cuda:3"])
def test_a_quantize_job_runs_its_model_and_batches_on_the_context_device(job, monkeypatch, device):
    seen = _recording(monkeypatch)
    result = tasks.run_quantize(job, FakeContext(device))
    assert seen["load"] == [device] and seen["quantize"] == [device] and seen["placed"] == [{"cpu"}]
    # mixed precision only where the device is CUDA: CPU runs stay float32, the reference
    assert isinstance(seen["amp"][0], torch.autocast if device.startswith("cuda") else contextlib.nullcontext)
    assert result["bits_per_weight"] == 2.0 and result["bits_per_weight_with_scales"] > 2.0
    assert set(result["bits_per_weight_parts"]) == {"scale", "offset"}


def test_the_method_moves_model_and_batches_to_the_device_it_is_given(monkeypatch):
    """Placement follows the argument, not the CPU the inputs were made on: on the meta device,
    the first thing the pipeline computes (every linear's calibration inputs) sees a meta model
    and meta windows."""
    torch.manual_seed(0)
    teacher = TinyDecoder(CONFIG)
    tokens = TokenData.from_ids(torch.randint(0, 256, (2000,)).tolist())
    seen = []

    class Placed(Exception):
        pass

    def layer_inputs(model, names, ids):
        seen.append((device_of(model).type, ids.device.type))
        raise Placed

    monkeypatch.setattr(quantize, "layer_inputs", layer_inputs)
    with pytest.raises(Placed):
        quantize.quantize(teacher, tokens, quantize.QuantConfig(method="rabit", seq_len=16), device="meta")
    assert seen == [("meta", "meta")]


@pytest.mark.parametrize("method", ["rabit", "lcqat", "scalar_qat"])
def test_bf16_autocast_qat_and_packed_inference_agree_with_float32(method):
    """What CUDA runs in bf16 autocast (QAT's forward passes, the packed model in Generate/Score),
    run here in CPU bf16 autocast: every layer type takes bf16 activations, each QAT step's loss
    stays within 5% of float32's (0.2-3% measured) and packed logits within 2% of the largest;
    and they do differ, so the autocast really ran."""
    torch.manual_seed(0)
    teacher = TinyDecoder(CONFIG).eval()
    tokens = TokenData.from_ids(torch.randint(0, 256, (4000,)).tolist())
    cfg = quantize.QuantConfig(method=method, steps=3, batch=2, seq_len=16, calib_windows=4, block_steps=2,
                               init_sweeps=3)
    amp = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    ref, ref_info = quantize.quantize(teacher, tokens, cfg)
    mixed, mixed_info = quantize.quantize(teacher, tokens, cfg, amp=amp)
    for want, got in zip(ref_info["losses"], mixed_info["losses"], strict=True):
        assert abs(got - want) <= 0.05 * want
    packed, windows = quantize.pack(mixed), tokens.valid_windows(16, 4)
    with torch.no_grad():
        want = forward(packed, windows)[0]
        with amp():
            got = forward(packed, windows)[0].float()
    diff = (got - want).abs().max().item()
    assert 0 < diff <= 0.02 * max(1.0, want.abs().max().item())


def test_the_server_device_follows_the_settings(monkeypatch):
    import paperworks.shared.config as config

    monkeypatch.setattr(config, "get_settings", lambda: SimpleNamespace(device="cuda:1"))
    assert data.server_device() == "cuda:1"
    monkeypatch.setattr(config, "get_settings", lambda: SimpleNamespace(device=""))
    assert data.server_device() == ("cuda:0" if torch.cuda.is_available() else "cpu")
