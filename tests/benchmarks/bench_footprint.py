"""The embedded stack's idle footprint: every registered service, nothing submitted.

`paperworks up` runs one process serving every service's gRPC API, one worker pool per service,
one dispatcher process for all of them, Kafka, Redis and the web console. A service's method code
(and torch) loads only with its first call or job, and an idle worker pool holds no task process,
so an idle stack is the runtimes alone. Measured: resident memory of each process (a worker pool:
its parent and task processes summed) once the stack is ready and has idled `IDLE_S`; the
baseline, measured in the same run, is a bare Python process that imports torch (what each
process would cost at least if it imported it).

Writes tests/benchmarks/results/footprint.json.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "footprint.json"
sys.path[:0] = [str(ROOT.parent)]

from paperworks.shared.devstack.processes import device_file  # noqa: E402
from paperworks.shared.registry import services  # noqa: E402
from support import start_stack  # noqa: E402

IDLE_S = float(os.environ.get("BENCH_FOOTPRINT_IDLE_S", "30"))
TARGET_MB = 2500


def memory_mb(pid: int) -> tuple[float, float, int]:
    """(RSS, PSS, processes) of a process and its children: RSS counts pages shared between
    processes (libraries, a worker's copy-on-write children) once per process, PSS splits them."""
    try:
        proc = psutil.Process(pid)
        infos = [p.memory_full_info() for p in [proc, *proc.children(recursive=True)]]
    except psutil.Error:
        return 0.0, 0.0, 0
    return sum(i.rss for i in infos) / 2**20, sum(i.pss for i in infos) / 2**20, len(infos)


def bare_torch_mb() -> float:
    code = "import torch, psutil, os; print(psutil.Process(os.getpid()).memory_info().rss / 2**20)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout)


def settle(stack, timeout_s: float = 300) -> None:
    """Waits for the start-up work to end: each worker pool's device report (a short-lived child
    that imports torch and the kernels) is written once, after the pool is ready."""
    pending = [name for name in stack.state.components if name.endswith(".worker")]
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        pending = [n for n in pending if not device_file(stack.settings, n).exists()]
        time.sleep(0.5)


def main() -> dict:
    names = list(services())
    with tempfile.TemporaryDirectory() as tmp:
        stack = start_stack(Path(tmp), services=names, PAPERWORKS_LOG_LEVEL="WARNING")
        try:
            settle(stack)
            time.sleep(IDLE_S)
            per_process = {name: memory_mb(comp.pid)
                           for name, comp in stack.state.components.items()}
        finally:
            stack.down()
    results = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "services": len(names), "idle_s": IDLE_S,
        "processes": sum(m[2] for m in per_process.values()),
        "rss_mb": {n: m[0] for n, m in per_process.items()},
        "pss_mb": {n: m[1] for n, m in per_process.items()},
        "total_mb": sum(m[0] for m in per_process.values()),
        "total_pss_mb": sum(m[1] for m in per_process.values()),
        "bare_python_with_torch_mb": bare_torch_mb(), "target_mb": TARGET_MB,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1))
    return results


def table(results: dict) -> str:
    rss, pss = results["rss_mb"], results["pss_mb"]
    bare = results["bare_python_with_torch_mb"]
    rows = [
        "| measure | baseline (same run) | paperworks | ratio |",
        "|---|---|---|---|",
        f"| idle embedded stack, {results['services']} services, {results['processes']} processes: "
        f"total RSS MB (PSS) | target {results['target_mb']} | {results['total_mb']:.0f} "
        f"({results['total_pss_mb']:.0f}) | {results['total_mb'] / results['target_mb']:.2f}x of "
        "the target |",
        f"| the idle servers process (all {results['services']} services' APIs), RSS MB | a bare "
        f"Python importing torch {bare:.0f} | {rss['servers']:.0f} | {rss['servers'] / bare:.2f}x |",
        f"| one idle worker pool (mean RSS), MB | a bare Python importing torch {bare:.0f} | "
        f"{_mean(rss, '.worker'):.0f} | {_mean(rss, '.worker') / bare:.2f}x |",
        "",
        "| process | RSS MB after idling | PSS MB |",
        "|---|---|---|",
    ]
    rows += [f"| {name} | {mb:.0f} | {pss[name]:.0f} |" for name, mb in sorted(rss.items())]
    return "\n".join(rows)


def _mean(rss: dict, suffix: str) -> float:
    values = [mb for name, mb in rss.items() if name.endswith(suffix)]
    return sum(values) / len(values)


if __name__ == "__main__":
    print(table(main()))
