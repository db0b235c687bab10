"""Which device a process's methods run on: one rule for job workers and sync-RPC servers.

`PAPERWORKS_DEVICE` when set (cpu, cuda:N); else cuda:0 where torch sees a GPU (each worker
process is given one with CUDA_VISIBLE_DEVICES); else cpu.
"""
from __future__ import annotations


def device() -> str:
    from paperworks.shared.config import get_settings

    if get_settings().device:
        return get_settings().device
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def autocast(device: str):
    """bf16 autocast on a CUDA device (where a method allows mixed precision), else nothing: CPU
    runs stay float32, so CPU results are the reference the GPU check compares against."""
    import contextlib

    import torch

    if str(device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def device_report(ops) -> dict:
    """Where this process runs its service's methods and, per kernel op the service calls, the
    backend that runs it there (building the backend if needed: a fallback to the PyTorch
    reference shows here instead of passing silently; with PAPERWORKS_KERNELS_REQUIRED a broken
    build is an error)."""
    from paperworks.kernels.backends import report

    where = device()
    return {"device": where, "kernels": report(ops, where) if ops else {}}


class GpuPeak:
    """The peak GPU memory a block allocated, read from torch's allocator: where a job's tensors
    really were, not where it was told to run. Never imports torch itself (a service without
    torch pays nothing); a process whose CUDA is not initialized reports nothing."""

    def __enter__(self):
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.reset_peak_memory_stats()
        self.peak_bytes: int | None = None
        return self

    def __exit__(self, *exc):
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            self.peak_bytes = int(torch.cuda.max_memory_allocated())
        return False

    def describe(self) -> str | None:
        if not self.peak_bytes:
            return None
        import torch

        return f"ran on cuda:{torch.cuda.current_device()} ({torch.cuda.get_device_name()}): peak GPU " \
               f"memory {self.peak_bytes / 2**20:.1f} MiB"
