"""Chooses the backend that runs an op: by device and availability, or forced by env var.

``PAPERWORKS_KERNEL_BACKEND=reference|cpu|cuda|triton`` forces one backend (tests and
benchmarks); it is read on every call. Unforced, CPU tensors go to the C++ backend and CUDA
tensors to the CUDA kernels, then Triton. A backend that lacks the op, runs on another
device or cannot be loaded (no compiler, no nvcc, no triton) hands over to the reference,
and says so once in the log; with ``PAPERWORKS_KERNELS_REQUIRED=1`` (the images set it) a
backend that cannot load is an error instead, so a broken build never runs silently on the
reference. :func:`report` says which backend each op runs on (workers and servers publish it:
``paperworks status``, /metrics). Backends are imported lazily, so an op never imports triton
or builds a library it does not need.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from types import ModuleType

import torch

from . import reference

log = logging.getLogger(__name__)

ENV = "PAPERWORKS_KERNEL_BACKEND"
REQUIRED_ENV = "PAPERWORKS_KERNELS_REQUIRED"
NAMES = ("reference", "cpu", "cuda", "triton")
PREFERENCE = {"cpu": ("cpu",), "cuda": ("cuda", "triton")}


@functools.cache
def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f".{name}", __package__)
    except ImportError as exc:
        log.warning("kernel backend %s cannot be imported: %s", name, exc)
        return None


@functools.cache
def _fall_back(name: str, op: str, device_type: str, reason: str) -> None:
    # an op a backend does not implement (beta_cdf_pdf anywhere, grid_contract on CUDA) runs on the
    # reference by design, which `report` shows: worth a note, not a warning on every start
    level = logging.INFO if reason == "op not implemented" else logging.WARNING
    log.log(level, "kernel backend %s cannot run %s on %s (%s): using the reference",
            name, op, device_type, reason)


def _why_not(module: ModuleType | None, op: str, device: torch.device) -> str | None:
    if module is None:
        return "not importable"
    if op not in module.OPS:
        return "op not implemented"
    if not module.runs_on(device):
        return "wrong device"
    if not module.available():
        return "not available"
    return None


def forced() -> str | None:
    """The backend named by the environment variable, if any."""
    name = os.environ.get(ENV, "").strip().lower()
    if name and name not in NAMES:
        raise ValueError(f"{ENV}={name!r}: expected one of {', '.join(NAMES)}")
    return name or None


def required() -> bool:
    return os.environ.get(REQUIRED_ENV, "").strip().lower() in ("1", "true", "yes")


class KernelUnavailable(RuntimeError):
    """A compiled backend the deployment requires cannot run an op (PAPERWORKS_KERNELS_REQUIRED)."""


def select(op: str, device: torch.device) -> ModuleType:
    """The backend module that will run ``op`` on tensors of ``device``."""
    name = forced()
    broken = []
    for candidate in (name,) if name else PREFERENCE.get(device.type, ()):
        if candidate == "reference":
            return reference
        module = _module(candidate)
        reason = _why_not(module, op, device)
        if reason is None:
            return module
        if reason in ("not importable", "not available"):
            broken.append(f"{candidate} {reason}")
        _fall_back(candidate, op, device.type, reason)
    if broken and required():
        raise KernelUnavailable(f"no compiled kernel runs {op} on {device.type} ({'; '.join(broken)}) "
                                f"and {REQUIRED_ENV} is set: the kernel build is broken")
    return reference


def report(ops, device: torch.device | str) -> dict[str, str]:
    """{op: the backend that runs it on `device`} (loading, or building, the backends)."""
    device = torch.device(device)
    return {op: getattr(select(op, device), "NAME", "reference") for op in ops}
