"""Where the segmenter's models and batches live: the job handlers put the GINE, the WNE denoiser and
every tensor they hand them on `ctx.device`, and the method code (GINE, WNE, the U-Net baseline)
places models and batches on the device it is given. The "meta" device holds no data, so a run
there proves placement follows the argument: nothing reaches a hard-coded CPU."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from paperworks.services.segmenter import baselines, data, tasks, wne
from paperworks.services.segmenter.checkpoint import Denoiser, Segmenter
from paperworks.services.segmenter.semir import gnn, minor, search
from paperworks.services.segmenter.spec import (
    DenoiseParams,
    SegmentParams,
    TrainDenoiserParams,
    TrainSegmenterParams,
)
from paperworks.shared.tasks.context import JobContext

DATASET = {"synthetic": {"seed": 4, "count": 2, "size": 20, "lesions": 1, "lesion_radius": 2.0}}


class StandIn(JobContext):
    """A job context on a chosen device whose artifacts (and the jobs it builds on) live in memory."""

    def __init__(self, device: str, stored: dict[str, bytes]):
        super().__init__("segmenter-test", "token", 1, None, None)
        self.device = device
        self.stored = stored

    def progress(self, *args, **kwargs):
        pass

    def put_artifact(self, name, data, media_type):
        self.stored[name] = data
        return {"name": name}

    def announce_model(self, *args, **kwargs):
        pass

    def job_artifact(self, service, job_id, name, field, kind=None):
        return self.stored[name], "sha"

    def finished_job(self, *args, **kwargs):
        return None


class Stop(Exception):
    """Raised by the recording forward where only the placement is checked."""


def record_forwards(monkeypatch, stop: bool) -> list:
    """[(devices of the tensors handed to the model, devices of its parameters)] per forward of a
    GINE node classifier or a WNE-wrapped denoiser."""
    seen = []
    for cls in (gnn.NodeClassifier, wne.Wrapped):
        real = cls.forward

        def forward(self, *args, _real=real, **kwargs):
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            seen.append(({t.device.type for t in tensors}, {p.device.type for p in self.parameters()}))
            if stop:
                raise Stop
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(cls, "forward", forward)
    return seen


@pytest.fixture(scope="module")
def stored() -> dict[str, bytes]:
    """A minor job's parameters and untrained models, as the jobs a handler builds on leave them."""
    image, _ = data.phantom(data.PhantomConfig(size=20), 4)
    params = search.hand_set([image])
    torch.manual_seed(0)
    models = {1: gnn.NodeClassifier(8, 1), 2: gnn.NodeClassifier(8, 1)}
    seg = Segmenter(params, {1: "organ", 2: "lesion"}, models)
    return {
        "minor_params.json": json.dumps({"params": params.as_dict()}).encode(),
        "segmenter.safetensors": seg.to_bytes(),
        "denoiser.safetensors": Denoiser(wne.Wrapped(wne.DnCNN()), "dncnn", 0.1).to_bytes(),
    }


def _jobs():
    return [
        (tasks.run_train_segmenter,
         TrainSegmenterParams(minor_job_id="m", dataset=DATASET, steps=2, hidden=8, layers=1)),
        (tasks.run_segment, SegmentParams(model_job_id="s", dataset=DATASET)),
        (tasks.run_train_denoiser, TrainDenoiserParams(dataset=DATASET, steps=2, batch_size=2)),
        (tasks.run_denoise, DenoiseParams(model_job_id="d", dataset=DATASET)),
    ]


def test_the_handlers_run_on_a_cpu_context_with_models_and_batches_there(monkeypatch, stored):
    seen = record_forwards(monkeypatch, stop=False)
    ctx = StandIn("cpu", dict(stored))
    results = [handler(params, ctx) for handler, params in _jobs()]
    assert results[0]["structures"] == {"1": "organ", "2": "lesion"} and results[1]["volumes"] == 2
    assert results[2]["train_slices"] > 0 and results[3]["cases"] == ["case_000", "case_001"]
    assert len(seen) > 4 and all(s == ({"cpu"}, {"cpu"}) for s in seen), seen
    assert {"segmenter.safetensors", "denoiser.safetensors", "case_000_seg.nii.gz"} <= set(ctx.stored)


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("job", range(4), ids=["train_segmenter", "segment", "train_denoiser", "denoise"])
def test_each_handler_hands_its_model_tensors_on_the_contexts_device(monkeypatch, stored, device, job):
    handler, params = _jobs()[job]
    seen = record_forwards(monkeypatch, stop=True)
    with pytest.raises(Stop):
        handler(params, StandIn(device, dict(stored)))
    assert seen == [({device}, {device})]


def test_the_methods_train_on_the_device_they_are_given():
    image, labels = data.phantom(data.PhantomConfig(size=16, lesions=1, lesion_radius=1.5), 0)
    m = minor.build_minor(image, search.hand_set([image]))
    g = gnn.train_structure([m], [labels == 1], steps=2, hidden=8, layers=1, device="meta")
    assert {t.device.type for t in (*g.parameters(), *g.buffers())} == {"meta"}
    assert gnn.node_logits(g, m).device.type == "meta"
    clean = np.random.default_rng(0).random((4, 16, 16)).astype(np.float32)
    for backbone in wne.BACKBONES:
        f = wne.train_denoiser(clean, 0.1, backbone, "wne", steps=2, batch=2, device="meta")
        assert {p.device.type for p in f.parameters()} == {"meta"}
    u = baselines.train_unet([(image[:8, :8, :8], labels[:8, :8, :8])], 2, steps=1, base=2, structure=1,
                             device="meta")
    assert {p.device.type for p in u.parameters()} == {"meta"}
    blob = Denoiser(wne.Wrapped(wne.DnCNN()), "dncnn", 0.1).to_bytes()
    assert {p.device.type for p in Denoiser.from_bytes(blob, "meta").model.parameters()} == {"meta"}
