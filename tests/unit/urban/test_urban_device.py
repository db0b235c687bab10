"""The pretrain job runs its method on `ctx.device` (PAPERWORKS_DEVICE, else cuda:0 on a GPU worker)."""
from __future__ import annotations

import pytest
import torch
from paperworks.services.urban import tasks
from paperworks.services.urban.spec import PretrainParams
from paperworks.shared.config import get_settings
from paperworks.shared.tasks.context import JobContext


class _Context(JobContext):
    """A JobContext whose device is the real property; progress and artifacts are kept in memory."""

    def __init__(self):
        super().__init__("urban-test", "token", 1, None, None)
        self.stored: dict[str, bytes] = {}

    def progress(self, *args, **kwargs):
        pass

    def put_artifact(self, name, data, content_type):
        self.stored[name] = data
        return name

    def announce_model(self, *args, **kwargs):
        pass


@pytest.mark.parametrize("setting", ["cpu", "cpu:0"])
def test_pretrain_job_honours_paperworks_device(monkeypatch, setting):
    seen = []
    real = tasks.pretrain

    def spy(encoder, fs, config, on_step=None, device="unset"):
        seen.append(device)
        history = real(encoder, fs, config, on_step, device=device)
        seen.append(encoder.device.type)  # where the trained weights live
        return history

    monkeypatch.setattr(tasks, "pretrain", spy)
    monkeypatch.setenv("PAPERWORKS_DEVICE", setting)
    get_settings.cache_clear()
    try:
        ctx = _Context()
        params = PretrainParams(dataset={"synthetic": {"seed": 1, "cities": 2, "locations_per_city": 20}},
                                embed_dim=16, heads=2, layers=1, steps=3, batch_size=16)
        result = tasks.run_pretrain(params, ctx)
    finally:
        get_settings.cache_clear()
    assert seen == [setting, torch.device(setting).type]
    assert result["steps"] == 3 and "model.safetensors" in ctx.stored
