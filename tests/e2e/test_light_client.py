"""The light client: `pip install paperworks` alone (no server extra) in a fresh virtualenv, its
`paperworks` command against a running stack: submit, watch, get, list, pull artifacts, and a
rejected parameter named by its field. The fresh environment has no torch, SQLAlchemy, Celery or
Kafka client, so nothing the client touches can lean on the server's code."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from paperworks.shared.devstack.deploy import ROOT
from support import TOKENS, chain, clean_environ


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("light")
    wheels = where / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    wheel = next(wheels.glob("paperworks-*.whl"))
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout + install.stderr
    return venv


def test_the_light_install_has_no_server_dependencies(light_venv):
    for heavy in ("torch", "sqlalchemy", "celery", "kafka", "paperworks.shared.config"):
        probe = subprocess.run([str(light_venv / "bin" / "python"), "-c", f"import {heavy}"],
                               capture_output=True, timeout=60)
        assert probe.returncode != 0, f"{heavy} is installed by the light client"


def test_the_light_cli_submits_watches_and_pulls_a_job(light_venv, stack, tmp_path):
    env = {**clean_environ(), "COLUMNS": "200", "PAPERWORKS_TOKEN": TOKENS["alice"],
           "PAPERWORKS_STATE_DIR": str(tmp_path / "nothing-here"),
           "PAPERWORKS_ENDPOINTS": ",".join(f"{n}={a}" for n, a in stack.endpoints.items())}

    def run(*args, check=True):
        proc = subprocess.run([str(light_venv / "bin" / "paperworks"), *args], env=env,
                              capture_output=True, text=True, timeout=120)
        if check:
            assert proc.returncode == 0, f"paperworks {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc

    out = run("submit", "ops", "digest", "--set", "seed=7", "--set", "steps=3",
              "--set", "rounds_per_step=50", "--watch").stdout
    job_id = out.split()[0]
    assert "SUCCEEDED" in out and chain(7, 3, 50)[-1] in out
    job = json.loads(run("get", job_id).stdout)
    assert job["result"]["digest"] == chain(7, 3, 50)[-1]
    assert job_id in run("list", "ops", "--state", "SUCCEEDED").stdout
    pulled = run("artifacts", "pull", job_id, "--out", str(tmp_path / "out")).stdout.split()
    assert any(json.loads(Path(p).read_text()).get("checkpoints", [None])[-1] == chain(7, 3, 50)[-1]
               for p in pulled if p.endswith(".json"))

    bad = run("submit", "ops", "digest", "--set", "steps=-1", check=False)
    assert bad.returncode != 0 and "INVALID_ARGUMENT" in bad.stderr and "steps" in bad.stderr
    unknown = run("submit", "ops", "nope", check=False)
    assert unknown.returncode != 0 and "digest" in unknown.stderr  # names the kinds there are
    server_only = run("up", check=False)
    assert server_only.returncode != 0 and "paperworks[server]" in server_only.stderr
