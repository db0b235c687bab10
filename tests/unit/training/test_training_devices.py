"""The device path without a GPU: the backend/device choice per rank (a pure function), the refusal
of a CUDA job the machine cannot host, and a pipeline stage run end to end (forward, backward,
point-to-point buffers) on the "meta" device, which fails on any tensor implicitly left on the CPU.
The NCCL run itself needs a GPU: its test (one rank per visible GPU, at most 2, against the CPU
reference) is skipped where there is none."""

from __future__ import annotations

import types

import pytest
import torch
from paperworks.services.training import tasks
from paperworks.services.training.cornstarch import costs, launch, pipeline
from paperworks.services.training.cornstarch.model import (
    MLLM,
    EncoderConfig,
    Freeze,
    MLLMConfig,
    microbatches,
    synthetic_batch,
)
from paperworks.services.training.cornstarch.placement import (
    DeviceUnavailable,
    Placement,
    check,
    placement,
)
from paperworks.shared.errors import FailedPrecondition
from transformers.utils import logging as hf_logging
from unit.training.hf_folders import composed_config, llama, siglip_vision

hf_logging.disable_progress_bar()


def test_backend_and_device_per_rank():
    assert placement("cpu", 3, gpus=0) == Placement("gloo", "cpu")
    assert placement("cpu", 1, gpus=4, local_rank=1) == Placement("gloo", "cpu")
    assert placement("cuda", 0, gpus=2) == Placement("nccl", "cuda:0")
    assert placement("cuda:0", 3, gpus=2) == Placement("nccl", "cuda:1")  # rank modulo the visible GPUs
    assert placement("cuda", 5, gpus=4, local_rank=2) == Placement("nccl", "cuda:2")  # LOCAL_RANK wins
    with pytest.raises(DeviceUnavailable, match="sees no GPU"):
        placement("cuda:0", 0, gpus=0)
    with pytest.raises(DeviceUnavailable, match="cpu or cuda"):
        placement("mps", 0, gpus=0)


def test_cuda_runs_the_machine_cannot_host_are_refused():
    check("cpu", 4, 0)
    check("cuda:0", 2, 2)
    with pytest.raises(DeviceUnavailable, match="no GPU"):
        check("cuda:0", 1, 0)
    with pytest.raises(DeviceUnavailable, match="2 ranks need a GPU each"):
        check("cuda", 2, 1)


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="this machine can host 2 CUDA ranks")
def test_a_cuda_job_without_gpus_is_a_failed_precondition_on_device():
    with pytest.raises(FailedPrecondition) as exc:
        tasks.device(types.SimpleNamespace(device="cuda:0"), 2)
    assert exc.value.field == "device" and "cuda:0" in exc.value.message
    assert tasks.device(types.SimpleNamespace(device="cpu"), 2) == "cpu"


class FakeDist:
    """torch.distributed's point-to-point calls, recording the device of every tensor exchanged."""

    def __init__(self):
        self.devices: list[str] = []

    def recv(self, tensor, src):
        self.devices.append(tensor.device.type)

    def isend(self, tensor, dst):
        self.devices.append(tensor.device.type)
        return types.SimpleNamespace(wait=lambda: None)


@pytest.fixture(scope="module")
def hf_cfg(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return composed_config(siglip_vision(root / "siglip"), llama(root / "llama"))


CODE = MLLMConfig(
    encoders=(EncoderConfig(tokens=8, input_dim=12, d_model=16, layers=2),),
    d_model=16,
    llm_layers=2,
    heads=2,
    vocab=16,
    text_tokens=8,
)


@pytest.mark.parametrize("which", ["code", "hf"])
def test_every_stage_runs_on_the_meta_device(which, hf_cfg, monkeypatch):
    """Both stages of a 2-stage plan (all trainable, so activations go down and gradients up) run
    a full iteration with the stage, microbatches and buffers on meta; any CPU tensor the run
    created itself would make an op fail with a device mismatch."""
    cfg = hf_cfg if which == "hf" else CODE
    ids = [list(x) for x in MLLM(cfg).layer_ids()]
    cut = len(ids) // 2
    plan = [{"layers": ids[:cut], "next": 1}, {"layers": ids[cut:], "next": None}]
    fake = FakeDist()
    monkeypatch.setattr(pipeline, "dist", fake)
    batch = synthetic_batch(cfg, 4, 0)
    for rank in (0, 1):
        model = MLLM(cfg).apply_freeze(Freeze.pattern("all_trainable", cfg.encoders))
        runner = pipeline.StageRunner(model, plan, rank, synthetic_batch(cfg, 2, 0), device="meta")
        loss = runner.run(batch, 2)
        assert all(p.device.type == "meta" for p in runner.params.values())
        assert all(p.grad is not None and p.grad.device.type == "meta" for p in runner.params.values())
        if rank == 1:
            assert loss is not None and loss.device.type == "meta"
    assert fake.devices and set(fake.devices) == {"meta"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the NCCL path)")
@pytest.mark.parametrize("which", ["code", "hf"])
def test_nccl_ranks_on_gpus_equal_the_cpu_reference(which, hf_cfg):
    """Never run here (no GPU). 1 or 2 NCCL ranks on cuda: loss and gradients equal the CPU
    single-process reference (tolerance for TF32 convolutions), and the profiler times on the GPU."""
    cfg = hf_cfg if which == "hf" else CODE
    world = min(2, torch.cuda.device_count())
    ids = [list(x) for x in MLLM(cfg).layer_ids()]
    cut = len(ids) // 2 if world == 2 else len(ids)
    plan = [{"layers": ids[:cut], "next": 1 if world == 2 else None}]
    plan += [{"layers": ids[cut:], "next": None}] if world == 2 else []
    task = {
        "kind": "pipeline",
        "model": cfg.to_dict(),
        "pattern": "frozen_encoder",
        "plan": plan,
        "microbatches": 2,
        "batch_size": 4,
        "steps": 1,
        "record_grads": True,
    }
    ranks = launch.launch(task, world, timeout=300, device="cuda:0")
    ref = MLLM(cfg).apply_freeze(Freeze.pattern("frozen_encoder", cfg.encoders))
    loss = pipeline.reference_step(ref, synthetic_batch(cfg, 4, 0), 2)
    grads = {k: g for r in ranks for k, g in r["grads"].items()}
    expected = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
    assert set(grads) == set(expected) and expected
    for name, g in expected.items():
        assert torch.allclose(grads[name], g, atol=1e-3, rtol=1e-3), name
    assert ranks[-1]["losses"][0] == pytest.approx(loss, rel=1e-4)
    mb = microbatches(synthetic_batch(cfg, 4, 0), 2)[0]
    model = MLLM(cfg).apply_freeze(Freeze.pattern("frozen_encoder", cfg.encoders))
    prof = costs.profile(model, mb, 1, "cuda:0")
    assert all(e["f"] > 0 for e in prof.values())
