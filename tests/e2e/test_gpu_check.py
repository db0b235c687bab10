"""`make gpu-check` stays runnable on machines without a GPU: it says so, and its service jobs
(tests/gpu/jobs.py) run on cpu through the same path, so they never go stale."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from paperworks.shared.registry import services

SCRIPT = Path(__file__).resolve().parents[1] / "gpu" / "gpu_check.py"
sys.path.insert(0, str(SCRIPT.parent))

import jobs  # noqa: E402


def test_every_service_that_owns_a_device_has_a_gpu_check_job():
    assert set(jobs.JOBS) == set(services()) - {"ops", "pipeline"}  # no method of their own


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_without_a_gpu_it_says_so_and_exits_3(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 3 and "no NVIDIA GPU" in proc.stdout
    assert not list(tmp_path.iterdir())


@pytest.mark.timeout(900)
def test_its_service_jobs_succeed_on_cpu(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=840)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    states = {s: r["cpu"]["state"] for s, r in report["services"].items()}
    assert states == dict.fromkeys(jobs.JOBS, "SUCCEEDED")
    assert "| service | job |" in (tmp_path / "gpu_check.md").read_text()
