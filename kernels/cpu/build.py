"""Builds the CPU C++ extension once per machine and loads it into torch.ops.

The build (``torch.utils.cpp_extension.load``: ninja, ``-O3 -march=native -fopenmp``) takes
~10-30 s the first time and is cached on disk, keyed by the CPU's feature flags so a cache
shared between machines never runs code built for another instruction set. Without a C++
compiler, or if the build fails, :func:`load` logs why and returns None so that the ops
fall back to the reference.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import shutil
from pathlib import Path

import torch

log = logging.getLogger(__name__)

NAME = "paperworks_cpu"
SOURCES = ("bindings.cpp", "linear.cpp", "sinkhorn.cpp", "grid.cpp")
CFLAGS = ("-O3", "-march=native", "-fopenmp")


def _cpu_fingerprint() -> str:
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line
                break
    except OSError:
        pass
    text = f"{platform.machine()}|{flags}|{torch.__version__}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def build_directory() -> Path:
    """``$TORCH_EXTENSIONS_DIR`` or ``~/.cache/paperworks/kernels``, per CPU kind."""
    env = os.environ.get("TORCH_EXTENSIONS_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "paperworks" / "kernels"
    path = base / f"{NAME}-{_cpu_fingerprint()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def compile_extension():
    """Builds (or loads the cached build of) the extension; raises when it cannot."""
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise FileNotFoundError(f"no C++ compiler ({compiler})")
    from torch.utils import cpp_extension

    here = Path(__file__).parent
    cpp_extension.load(
        name=NAME,
        sources=[str(here / s) for s in SOURCES],
        extra_cflags=list(CFLAGS),
        extra_ldflags=["-fopenmp"],
        build_directory=str(build_directory()),
        is_python_module=False,
        verbose=False,
    )
    return getattr(torch.ops, NAME)


def _build():
    try:
        return compile_extension()
    except Exception as exc:  # noqa: BLE001 - any build failure means "use the reference"
        log.warning("CPU kernels failed to build, falling back to the reference: %s",
                    str(exc)[-2000:])
        return None


@functools.cache
def load():
    """The ``torch.ops.paperworks_cpu`` namespace, or None when it cannot be built."""
    return _build()


if __name__ == "__main__":
    # image builds: compile now, and fail the build if it cannot (no silent reference at run time)
    compile_extension()
    print(f"built {NAME} in {build_directory()}")
