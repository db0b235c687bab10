"""The embedded stack signals only its own processes: a pid from the state file that the kernel
has since given to another process is left alone (its start time differs)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading

from paperworks.shared.config import Settings
from paperworks.shared.devstack.processes import device_file, publish_device
from paperworks.shared.devstack.stack import Component, _signal_group, running, start_ticks


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)


def test_a_component_whose_pid_now_names_another_process_is_not_running_and_not_signalled():
    proc = sleeper()
    try:
        ours = Component("a", [], pid=proc.pid, started=start_ticks(proc.pid))
        assert ours.started is not None and running(ours)
        reused = Component("b", [], pid=proc.pid, started=ours.started - 1)  # an older process's pid
        assert not running(reused)
        _signal_group(reused, signal.SIGTERM)
        assert proc.poll() is None  # the other process lives on
        _signal_group(ours, signal.SIGTERM)
        assert proc.wait(timeout=10) == -signal.SIGTERM
        assert not running(ours)
    finally:
        proc.kill()
        proc.wait()


def test_a_state_file_without_start_times_still_stops_its_processes():
    proc = sleeper()
    try:
        legacy = Component("a", [], pid=proc.pid)  # written before start times were recorded
        assert running(legacy)
        _signal_group(legacy, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_the_plan_serves_every_service_from_one_process_each_on_its_port(tmp_path):
    from paperworks.shared.devstack.processes import SERVERS
    from paperworks.shared.devstack.stack import EmbeddedStack

    stack = EmbeddedStack(Settings(state_dir=tmp_path), ["ops", "pipeline"], environ={})
    stack.state = state = stack._plan()
    ports = {name: s["port"] for name, s in state.services.items()}
    assert len(set(ports.values())) == 2
    argv = state.components[SERVERS].argv
    assert argv[-4:] == ["ops", "pipeline", "--ports", f"ops={ports['ops']},pipeline={ports['pipeline']}"]
    assert {"ops.worker", "pipeline.worker", "dispatcher"} <= set(state.components)
    assert not [name for name in state.components if name.endswith(".server")]
    env = stack._component_env(state.components[SERVERS])
    assert env["PAPERWORKS_METRICS_PORT"] == str(state.services["ops"]["metrics_port"])


def test_serve_names_what_is_wrong_with_its_arguments():
    from paperworks.shared.sdk.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    for args, said in ((["serve", "nosuch"], "unknown service(s): nosuch"),
                       (["serve", "ops", "pipeline"], "need --ports"),
                       (["serve", "ops", "pipeline", "--ports", "ops=1"], "no port for pipeline"),
                       (["serve", "ops", "--ports", "ops:1"], "expected NAME=PORT")):
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and said in result.output, (args, result.output)


def test_a_device_report_worked_out_in_a_child_reaches_the_callback(tmp_path, monkeypatch):
    """What servers do (`paperworks status` and /metrics hear the child's report; the server
    itself never imports torch for it)."""
    monkeypatch.setenv("PAPERWORKS_STATE_DIR", str(tmp_path))  # the child's settings
    settings = Settings(state_dir=tmp_path)
    heard: list[dict] = []
    done = threading.Event()
    publish_device(settings, "ops.server", [], on_report=lambda r: (heard.append(r), done.set()))
    assert done.wait(120), "the report never reached the callback"
    assert heard == [json.loads(device_file(settings, "ops.server").read_text())]
    assert heard[0]["device"] in ("cpu", "cuda:0")


def test_device_reports_asked_together_are_worked_out_by_one_child(tmp_path, monkeypatch):
    """The first calls to several of the servers process's services import torch once between
    them: reports queued while a child runs go to the next child together."""
    monkeypatch.setenv("PAPERWORKS_STATE_DIR", str(tmp_path))
    settings = Settings(state_dir=tmp_path)
    children = []
    run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: (children.append(a), run(*a, **k))[1])
    heard: list[str] = []
    done = threading.Event()
    names = [f"s{i}.server" for i in range(4)]

    def hear(report):
        heard.append(report["device"])
        if len(heard) == len(names):
            done.set()

    for name in names:
        publish_device(settings, name, [], on_report=hear)
    assert done.wait(120), f"heard {len(heard)} of {len(names)} reports"
    assert all(device_file(settings, name).exists() for name in names)
    assert 1 <= len(children) <= 2  # the first child, and at most one for the rest
