"""CUDA backend: the low-bit linear ops and Sinkhorn as plain CUDA C++ behind a C ABI.

The CPU torch wheel ships no CUDA headers, so the kernels (``.cu`` files beside this
module, ABI in ``paperworks_cuda.h``) do not use torch at all: :mod:`.build` compiles them
with nvcc and this module binds the library with ctypes, passing ``data_ptr()`` of torch
tensors and the current CUDA stream. It only runs where ``torch.cuda.is_available()``.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os

import torch

from ..results import SinkhornResult
from . import build

log = logging.getLogger(__name__)

NAME = "cuda"
OPS = frozenset({"binary_linear", "int2_linear", "vq_linear", "sinkhorn"})

_P, _I, _D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
SIGNATURES = {
    "pwk_binary_linear": (_P, _I, _I, _P, _P, _I, _I, _P, _P, _P),
    "pwk_int2_linear": (_P, _I, _I, _P, _P, _P, _I, _I, _P, _P, _P),
    "pwk_vq_linear": (_P, _I, _I, _P, _P, _P, _I, _I, _P, _P, _P),
    "pwk_sinkhorn_f32": (_P, _P, _P, _I, _I, _I, _D, _I, _D, _I, _P, _P, _P, _P, _P, _P,
                         ctypes.POINTER(_I), _P),
}
SIGNATURES["pwk_sinkhorn_f64"] = SIGNATURES["pwk_sinkhorn_f32"]


def bind(path) -> ctypes.CDLL:
    """Loads the library at ``path`` and declares the C signatures."""
    lib = ctypes.CDLL(str(path))
    for name, argtypes in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return lib


@functools.cache
def _library() -> ctypes.CDLL | None:
    if not torch.cuda.is_available():
        return None
    try:
        # images compile the library at build time (infra/docker/Dockerfile) and name it here
        return bind(os.environ.get("PAPERWORKS_CUDA_LIBRARY") or build.build())
    except (OSError, RuntimeError) as exc:
        log.warning("CUDA kernels unavailable, falling back: %s", exc)
        return None


def available() -> bool:
    return _library() is not None


def runs_on(device) -> bool:
    return device.type == "cuda"


def _ptr(t: torch.Tensor | None):
    return None if t is None else t.data_ptr()


def _call(name: str, device: torch.device, *args) -> None:
    stream = torch.cuda.current_stream(device).cuda_stream
    code = getattr(_library(), name)(*args, stream)
    if code != 0:
        raise RuntimeError(f"{name} failed with CUDA error {code}")


def _output(x: torch.Tensor, n: int) -> torch.Tensor:
    return torch.empty(x.shape[0], n, device=x.device, dtype=torch.float32)


def binary_linear(x, signs, alpha, bias):
    (batch, m), (paths, n) = x.shape, alpha.shape
    y = _output(x, n)
    _call("pwk_binary_linear", x.device, _ptr(x), batch, m, _ptr(signs), _ptr(alpha), paths,
          n, _ptr(bias), _ptr(y))
    return y


def int2_linear(x, codes, scale, offset, group_size, bias):
    (batch, m), n = x.shape, codes.shape[0]
    y = _output(x, n)
    _call("pwk_int2_linear", x.device, _ptr(x), batch, m, _ptr(codes), _ptr(scale),
          _ptr(offset), group_size, n, _ptr(bias), _ptr(y))
    return y


def vq_linear(x, codes, codebook, scale, group_size, bias):
    (batch, m), n = x.shape, codes.shape[0]
    y = _output(x, n)
    _call("pwk_vq_linear", x.device, _ptr(x), batch, m, _ptr(codes), _ptr(codebook),
          _ptr(scale), group_size or 0, n, _ptr(bias), _ptr(y))
    return y


def sinkhorn(cost, a, b, epsilon, max_iter, tol, check_every):
    batch, n, m = cost.shape
    plan = torch.empty_like(cost)
    total = cost.new_empty(batch)
    error = cost.new_empty(batch)
    f, g, lse = cost.new_empty(batch, n), cost.new_empty(batch, m), cost.new_empty(batch, n)
    n_iter = ctypes.c_int64(0)
    name = "pwk_sinkhorn_f64" if cost.dtype == torch.float64 else "pwk_sinkhorn_f32"
    _call(name, cost.device, _ptr(cost), _ptr(a), _ptr(b), batch, n, m, epsilon, max_iter,
          tol, check_every, _ptr(plan), _ptr(total), _ptr(f), _ptr(g), _ptr(error), _ptr(lse),
          ctypes.byref(n_iter))
    return SinkhornResult(plan, total, f, g, int(n_iter.value), error)
