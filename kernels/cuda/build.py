"""Compiles the CUDA sources into one shared library with nvcc, cached by content.

The library exposes the C ABI of ``paperworks_cuda.h``. It is built for one GPU
architecture (the current GPU's, else ``$PAPERWORKS_CUDA_ARCH`` or sm_90) to keep nvcc
fast, into ``$TORCH_EXTENSIONS_DIR`` or ``~/.cache/paperworks/kernels``, keyed by a hash of
the sources, the architecture and the nvcc version, so each is compiled once per machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).parent
SOURCES = ("linear.cu", "sinkhorn.cu")
HEADER = "paperworks_cuda.h"
LIBRARY = "libpaperworks_cuda.so"
FLAGS = ("-O3", "--shared", "-Xcompiler", "-fPIC", "-std=c++17")


def nvcc() -> str | None:
    """Path of nvcc (on PATH or under ``$CUDA_HOME``), or None."""
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidate = Path(home, "bin", "nvcc") if home else None
    return str(candidate) if candidate and candidate.exists() else None


def default_arch() -> str:
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return os.environ.get("PAPERWORKS_CUDA_ARCH", "sm_90")


def _cache_root() -> Path:
    env = os.environ.get("TORCH_EXTENSIONS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "paperworks" / "kernels"


def _key(compiler: str, arch: str) -> str:
    digest = hashlib.sha256()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    for part in (version, arch, *FLAGS):
        digest.update(part.encode())
    for name in (*SOURCES, HEADER):
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()[:16]


def build(arch: str | None = None) -> Path:
    """Path of the compiled library, compiling it first if needed (a few seconds)."""
    compiler = nvcc()
    if compiler is None:
        raise FileNotFoundError("nvcc not found (PATH, CUDA_HOME)")
    arch = arch or default_arch()
    target = _cache_root() / f"paperworks_cuda-{arch}-{_key(compiler, arch)}" / LIBRARY
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / LIBRARY
        cmd = [compiler, *FLAGS, f"-arch={arch}", "-o", str(out),
               *(str(HERE / s) for s in SOURCES)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"nvcc failed:\n{result.stderr[-4000:]}")
        out.replace(target)  # atomic, so concurrent builds never see half a library
    return target
