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


# run end to end here (the quantizer's parameters need its uploads); every other service's job
# kind is run by that service's integration tests, and its gpu-check parameters are validated below
# (the whole set on cpu took 4-5 minutes of CI)
RUN_ON_CPU = ("quantizer", "moe", "training")


@pytest.mark.timeout(600)
def test_its_service_jobs_succeed_on_cpu(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--services", ",".join(RUN_ON_CPU),
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    states = {s: r["cpu"]["state"] for s, r in report["services"].items()}
    assert states == dict.fromkeys(RUN_ON_CPU, "SUCCEEDED")
    assert "| service | job |" in (tmp_path / "gpu_check.md").read_text()


def test_every_other_job_is_a_valid_submission(tmp_path):
    for name, (kind, prepare) in jobs.JOBS.items():
        if name not in RUN_ON_CPU:  # these take no inputs the check must upload first
            services()[name].kind(kind).params.model_validate(prepare(None, tmp_path / name))


def test_an_unknown_service_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--services", "nosuch",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no gpu-check job for nosuch" in proc.stderr
