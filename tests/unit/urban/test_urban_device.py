"""Urban runs where its context says: the job handlers on `ctx.device` (PAPERWORKS_DEVICE, else cuda:0
on a GPU worker), the Embed/Predict caches on the server's `device()`; models AND batches go there.
On the meta device nothing can be computed, so a spy records the devices of the model and tensors
handed to the method and stops the run: placement that follows the context, not a hard-coded cpu.
Mixed precision: the forward passes tolerate bf16 autocast (measured here on the CPU's bf16)."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from paperworks.services.urban import servicer as servicer_module
from paperworks.services.urban import tasks
from paperworks.services.urban.checkpoint import encoder_to_bytes, probe_to_bytes
from paperworks.services.urban.data import world
from paperworks.services.urban.probes import Probe
from paperworks.services.urban.spec import EvaluateParams, FitTaskParams, PretrainParams
from paperworks.services.urban.urbanfusion import train
from paperworks.services.urban.urbanfusion.encoder import UrbanEncoder
from paperworks.services.urban.urbanfusion.model import UrbanFusion
from paperworks.shared.config import get_settings
from paperworks.shared.tasks.context import JobContext
from paperworks.urban.v1 import urban_pb2
from torch import nn

SYNTHETIC = {"seed": 1, "cities": 2, "locations_per_city": 20}
SMALL = {"embed_dim": 16, "heads": 2, "layers": 1, "steps": 3, "batch_size": 16}


class _Context(JobContext):
    """A JobContext whose device is the real property unless set; progress and artifacts in memory;
    the pretrain job it builds on is `encoder_bytes`."""

    def __init__(self, device: str | None = None, encoder_bytes: bytes = b""):
        super().__init__("urban-test", "token", 1, None, None)
        if device is not None:
            self.device = device
        self.encoder_bytes = encoder_bytes
        self.stored: dict[str, bytes] = {}

    def progress(self, *args, **kwargs):
        pass

    def put_artifact(self, name, data, content_type):
        self.stored[name] = data
        return name

    def put_json(self, name, obj):
        self.stored[name] = obj

    def announce_model(self, *args, **kwargs):
        pass

    def job_artifact(self, service, job_id, name, field, kind=None):
        return self.encoder_bytes, "sha"


class Placed(Exception):
    """Raised by a spy once it has seen what the method was handed."""


def _devices(value) -> list[str]:
    if isinstance(value, torch.Tensor):
        return [value.device.type]
    if isinstance(value, nn.Module):
        return [p.device.type for p in value.parameters()]
    if isinstance(value, Probe):
        return _devices(value.net)
    if isinstance(value, dict):
        return [d for v in value.values() for d in _devices(v)]
    return []


def stop_at(monkeypatch, owner, name: str) -> list[str]:
    """Replaces `owner.name` by a spy: it records the device of every tensor, module (parameters)
    and probe it is handed, then raises Placed. Returns the list it fills."""
    seen: list[str] = []

    def spy(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            seen.extend(_devices(value))
        raise Placed

    monkeypatch.setattr(owner, name, spy)
    return seen


@pytest.fixture(scope="module")
def encoder_bytes():
    data = world.generate(world.WorldConfig(**SYNTHETIC))
    return encoder_to_bytes(UrbanEncoder.create(data, {}, dim=16, layers=1, heads=2, seed=0))


@pytest.mark.parametrize("setting", ["cpu", "cpu:0"])
def test_pretrain_job_honours_paperworks_device(monkeypatch, setting):
    seen = []
    real = tasks.pretrain

    def spy(encoder, fs, config, on_step=None, device="unset", autocast=None):
        seen.append(device)
        history = real(encoder, fs, config, on_step, device=device, autocast=autocast)
        seen.append(encoder.device.type)  # where the trained weights live
        return history

    monkeypatch.setattr(tasks, "pretrain", spy)
    monkeypatch.setenv("PAPERWORKS_DEVICE", setting)
    get_settings.cache_clear()
    try:
        ctx = _Context()
        result = tasks.run_pretrain(PretrainParams(dataset={"synthetic": SYNTHETIC}, **SMALL), ctx)
    finally:
        get_settings.cache_clear()
    assert seen == [setting, torch.device(setting).type]
    assert result["steps"] == 3 and "model.safetensors" in ctx.stored


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_pretrain_places_model_and_batches_on_the_context_device(monkeypatch, device):
    seen = stop_at(monkeypatch, train, "urbanfusion_loss")  # (model, xyz, features, present, ...)
    with pytest.raises(Placed):
        tasks.run_pretrain(PretrainParams(dataset={"synthetic": SYNTHETIC}, **SMALL), _Context(device))
    assert len(seen) > 10 and set(seen) == {device}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("kind", ["fit_task", "evaluate"])
def test_downstream_jobs_embed_on_the_context_device(monkeypatch, encoder_bytes, device, kind):
    seen = stop_at(monkeypatch, UrbanFusion, "forward")  # (model, xyz, features, mask)
    common = {"pretrain_job_id": "urban-pre", "dataset": {"synthetic": SYNTHETIC}}
    with pytest.raises(Placed):
        if kind == "fit_task":
            tasks.run_fit_task(FitTaskParams(**common, target="house_price", task_type="regression"),
                               _Context(device, encoder_bytes))
        else:
            tasks.run_evaluate(EvaluateParams(**common, tasks=[{"target": "house_price"}]),
                               _Context(device, encoder_bytes))
    assert len(seen) > 10 and set(seen) == {device}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("probe", ["linear", "mlp"])
def test_probes_fit_on_the_context_device(monkeypatch, encoder_bytes, device, probe):
    # the embedding is stubbed (nothing computes on meta); the probe gets it on the job's device
    monkeypatch.setattr(UrbanEncoder, "embed", lambda self, fs: np.ones((len(fs), self.dim), np.float32))
    seen = stop_at(monkeypatch, Probe, "_fit_mlp" if probe == "mlp" else "_fit_ridge")  # (probe, x, y)
    params = FitTaskParams(pretrain_job_id="urban-pre", dataset={"synthetic": SYNTHETIC},
                           target="house_price", task_type="regression", probe=probe)
    with pytest.raises(Placed):
        tasks.run_fit_task(params, _Context(device, encoder_bytes))
    assert len(seen) >= 3 and set(seen) == {device}


def _servicer(monkeypatch, device: str, artifacts: dict[str, bytes]):
    monkeypatch.setattr(servicer_module, "device", lambda: device)
    monkeypatch.setattr(servicer_module, "job_artifact",
                        lambda store, blobs, tenant, service, job_id, name, field, kind=None:
                        (artifacts[name], f"{name}-sha"))
    return servicer_module.UrbanServicer(SimpleNamespace(store=None, artifacts=None))


def _probe_bytes(dim: int) -> bytes:
    probe = Probe("regression", "linear", dim).fit(np.random.default_rng(0).normal(size=(40, dim)),
                                                    np.arange(40.0))
    return probe_to_bytes(probe, {"pretrain_job_id": "urban-pre", "target": "house_price",
                                  "append_coordinates": False, "modalities": []})


LOCATIONS = [urban_pb2.Location(id="a", lat=47.37, lon=8.54), urban_pb2.Location(id="b", lat=47.38, lon=8.55)]


def test_sync_rpcs_cache_and_run_on_the_server_device(monkeypatch, encoder_bytes):
    artifacts = {"model.safetensors": encoder_bytes, "probe.safetensors": _probe_bytes(16)}
    svc = _servicer(monkeypatch, "meta", artifacts)
    assert svc._encoder("alice", "urban-pre", "pretrain_job_id").device.type == "meta"
    probe, _ = svc._probe("alice", "urban-fit")
    assert {p.device.type for p in probe.net.parameters()} == {"meta"}
    seen = stop_at(monkeypatch, UrbanFusion, "forward")
    with pytest.raises(Placed):
        svc._embed("alice", urban_pb2.EmbedRequest(pretrain_job_id="urban-pre", locations=LOCATIONS))
    assert len(seen) > 10 and set(seen) == {"meta"}


def test_sync_rpcs_answer_on_cpu(monkeypatch, encoder_bytes):
    artifacts = {"model.safetensors": encoder_bytes, "probe.safetensors": _probe_bytes(16)}
    svc = _servicer(monkeypatch, "cpu", artifacts)
    reply = svc._embed("alice", urban_pb2.EmbedRequest(pretrain_job_id="urban-pre", locations=LOCATIONS))
    assert list(reply.embeddings.shape) == [2, 16] and list(reply.used_modalities) == ["coordinates"] * 2
    predicted = svc._predict("alice", urban_pb2.PredictRequest(task_job_id="urban-fit", locations=LOCATIONS))
    assert len(predicted.values) == 2 and np.isfinite(predicted.values).all()


def test_forward_passes_tolerate_bf16_autocast(tiny_world, tiny_encoder):
    """The jobs' mixed precision (bf16 autocast around forward passes only; contrastive logits in
    float32), checked on the CPU's bf16: 40 pretraining steps track float32 within 0.03 in every
    loss term at every step (measured: 0.009), the embeddings within cosine 0.999 (measured 0.9999)."""
    fs = tiny_encoder.features(tiny_world)
    bf16 = lambda d: torch.autocast(d.type, dtype=torch.bfloat16)  # noqa: E731
    reference, mixed = copy.deepcopy(tiny_encoder), copy.deepcopy(tiny_encoder)
    config = train.PretrainConfig(steps=40, batch_size=64, seed=0)
    full = train.pretrain(reference, fs, config)
    half = train.pretrain(mixed, fs, config, autocast=bf16)
    for term in ("contrastive", "reconstruction", "loss"):
        gap = np.abs(np.array([h[term] for h in full]) - np.array([h[term] for h in half]))
        assert gap.max() < 0.03, (term, gap.max())
    assert full[-1]["contrastive"] < full[0]["contrastive"] - 1.0  # it trained: the check is not vacuous
    exact = reference.embed(fs)
    approx = reference.to("cpu", bf16).embed(fs)
    assert approx.dtype == np.float32
    cosine = (exact * approx).sum(1) / np.linalg.norm(exact, axis=1) / np.linalg.norm(approx, axis=1)
    assert cosine.min() > 0.999 and not np.array_equal(exact, approx)  # bf16 did run
