"""Where a rank runs: the process-group backend and the rank's device, from the job's device and
the world (torchrun's convention: `LOCAL_RANK` names the GPU on its node).

CPU: every rank uses gloo on CPU tensors. CUDA: every rank uses NCCL and binds `cuda:<local rank>`
(`LOCAL_RANK` when the launcher sets it, else the global rank) modulo the GPUs it sees (the index
in the job's `cuda:<i>` is not used: a worker is given its GPUs by CUDA_VISIBLE_DEVICES); its stage's
modules, its microbatches and every point-to-point buffer live there (`pipeline.StageRunner`), and
timings synchronize the device first. A CUDA job on a machine without enough GPUs is refused before
any process starts (`check`): NCCL allows one rank per GPU.

Pure functions (the GPU count is an argument), so the choice is unit-tested without a GPU.
"""

from __future__ import annotations

from typing import NamedTuple


class DeviceUnavailable(ValueError):
    """The job's device cannot host the run (the message names the device and what is missing)."""


class Placement(NamedTuple):
    backend: str  # "gloo" | "nccl"
    device: str  # "cpu" | "cuda:<i>"


def _kind(device: str) -> str:
    kind = str(device).split(":", 1)[0]
    if kind not in ("cpu", "cuda"):
        raise DeviceUnavailable(f"device {device!r}: the training workers run on cpu or cuda only")
    return kind


def check(device: str, world: int, gpus: int) -> None:
    """Refuse a CUDA run the machine cannot host: no visible GPU, or fewer GPUs than ranks."""
    if _kind(device) == "cpu":
        return
    if gpus == 0:
        raise DeviceUnavailable(f"device {device!r} asks for CUDA, but this worker sees no GPU")
    if world > gpus:
        raise DeviceUnavailable(
            f"device {device!r}: {world} ranks need a GPU each (NCCL), this worker sees {gpus}"
        )


def placement(device: str, rank: int, gpus: int, local_rank: int | None = None) -> Placement:
    """The backend and device of `rank` for a job on `device` (see the module docstring)."""
    if _kind(device) == "cpu":
        return Placement("gloo", "cpu")
    if gpus < 1:
        raise DeviceUnavailable(f"device {device!r} asks for CUDA, but rank {rank} sees no GPU")
    local = rank if local_rank is None else local_rank
    return Placement("nccl", f"cuda:{local % gpus}")


def synchronize(device) -> None:
    """Wait for the device's queued work (CUDA kernels run asynchronously) before reading a clock."""
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)
