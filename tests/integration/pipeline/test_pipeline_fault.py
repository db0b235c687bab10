"""Fault: the pipeline's task process is killed while a step runs. The task is delivered again,
the next execution resumes from the database (every step submitted again under its idempotency
key finds the job it already made), and the pipeline ends once, no step run twice."""
from __future__ import annotations

import signal
from collections import Counter

from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.v1 import jobs_pb2
from support import chain, finished, task_process


def digest(name, seed, steps, rounds, after=()):
    return {"name": name, "service": "ops", "kind": "digest", "after": list(after),
            "params": {"seed": seed, "steps": steps, "rounds_per_step": rounds}}


def test_a_killed_pipeline_worker_resumes_without_submitting_any_step_twice(stack, client):
    steps = [digest("a", 1, 2, 100), digest("b", 2, 400, 20000, after=["a"]),
             digest("c", 3, 2, 100, after=["b"])]
    run = client.run_pipeline(steps)
    for event in client.watch(run.id, timeout=120):
        if "b running" in event.progress.message:
            break
    child = task_process(stack.state.components["pipeline.worker"].pid)
    child.send_signal(signal.SIGKILL)
    done = finished(client, run, timeout=180)
    assert done.attempts == 2  # the killed execution and the one that resumed
    assert done.result["succeeded"] == 3
    assert done.result["steps"]["b"]["outputs"]["result"]["digest"] == chain(2, 400, 20000)[-1]
    jobs = [j for j in client.list("ops", page_size=500)[0] if j.parent_job_id == run.id]
    keys = Counter(j.idempotency_key for j in jobs)
    assert keys == Counter({f"{run.id}:{s}": 1 for s in "abc"})  # one job per step, ever
    assert all(PROTO_TO_STATE[j.state] == "SUCCEEDED" and j.attempts == 1 for j in jobs)
    ends = [e for e in client.watch(run.id, timeout=30)
            if e.type == jobs_pb2.JOB_EVENT_TYPE_STATE_CHANGED and PROTO_TO_STATE[e.state] in
            ("SUCCEEDED", "FAILED", "CANCELLED")]
    assert len(ends) == 1
