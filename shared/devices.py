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
