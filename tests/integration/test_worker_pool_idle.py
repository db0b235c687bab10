"""An idle worker pool holds no task process: the first job forks one, and one left without a job
for `PAPERWORKS_WORKER_IDLE_EXIT_S` exits (with the models and torch it loaded), the next job
starting a fresh one. Jobs are neither lost nor run twice across the pool's comings and goings.
The servers process takes submits and watches, and reports its device, without importing torch."""
from __future__ import annotations

import json

import psutil
import pytest
from paperworks.shared.devstack.processes import SERVERS, device_file
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from support import TOKENS, chain, start_stack, task_processes, wait_for

IDLE_EXIT_S = 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = start_stack(tmp_path_factory.mktemp("idle-pool"), PAPERWORKS_WORKER_IDLE_EXIT_S=str(IDLE_EXIT_S))
    yield s
    s.down()


def pool(stack) -> list[psutil.Process]:
    return task_processes(stack.state.components["ops.worker"].pid)


def run_one(client: Client, seed: int) -> None:
    job = client.submit("ops", "digest", seed=seed, steps=2, rounds_per_step=100)
    done = client.wait(job.id, timeout=60)
    assert PROTO_TO_STATE[done.state] == "SUCCEEDED" and done.attempts == 1
    assert done.result["digest"] == chain(seed, 2, 100)[-1]


def test_task_processes_come_with_jobs_and_leave_when_idle(stack):
    assert wait_for(lambda: not pool(stack), 5), "an idle pool kept a task process"
    with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as client:
        run_one(client, 1)
        [first] = pool(stack)
        run_one(client, 2)  # within the idle window: the same process takes it
        assert pool(stack) == [first]
        # Celery's autoscaler checks every IDLE_EXIT_S: gone within two of its rounds
        assert wait_for(lambda: not pool(stack), 3 * IDLE_EXIT_S + 5), \
            "the task process outlived its idle window"
        run_one(client, 3)
        [second] = pool(stack)
        assert second.pid != first.pid


def test_the_servers_process_reports_its_device_without_importing_torch(stack):
    """Its device report (`paperworks status`) is worked out by a short-lived child once the first
    call loaded the servicer: a submit or a watch never brings torch (~200 MB) into the process."""
    with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as client:
        run_one(client, 4)
    report = device_file(stack.settings, "ops.server")
    assert wait_for(report.exists, 60), "the server published no device report"
    assert json.loads(report.read_text())["device"] == "cpu"
    servers = psutil.Process(stack.state.components[SERVERS].pid)
    assert not [m.path for m in servers.memory_maps() if "libtorch" in m.path]
