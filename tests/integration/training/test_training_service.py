"""The training service over real gRPC on the embedded stack: every job kind through Kafka and
Celery (plan_parallelism; train from the plan's job on 2 worker processes; train planned inline by a
baseline method; simulate from a plan job and from explicit stage costs), the inline Plan RPC, a
cancelled train job whose worker processes are all reaped, field-naming refusals, and a model
composed of Hugging Face folders (a Llama uploaded as an archive, a SigLIP tower as a server path)
through plan_parallelism, train from that plan on 2 processes, simulate and the Plan RPC."""

from __future__ import annotations

import os
import re
import tarfile
import time

import grpc
import pytest
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.errors import field_violations
from paperworks.training.v1 import training_pb2
from paperworks.v1 import jobs_pb2
from support import finished, service_fixtures
from unit.training.hf_folders import llama, siglip_vision

stack, client = service_fixtures("training")
MODEL = {
    "encoders": [{"name": "vision", "tokens": 8, "input_dim": 12, "d_model": 16, "layers": 2}],
    "d_model": 16,
    "llm_layers": 2,
    "heads": 2,
    "vocab": 16,
    "text_tokens": 8,
}


@pytest.fixture(scope="module")
def plan(client):
    job = client.submit(
        "training",
        "plan_parallelism",
        model=MODEL,
        pattern="frozen_encoder",
        world_size=2,
        cp_size=2,
        sequence={"seq_len": 2048, "samples": 2},
        profile_repeats=1,
    )
    return finished(client, job, timeout=180)


def test_plan_reports_stages_baselines_and_cp(plan):
    r = plan.result
    assert len(r["stages"]) == 2 and sum(len(s["layers"]) for s in r["stages"]) == 8
    assert r["stages"][-1]["next"] == -1 and r["predicted_iteration_time"] > 0
    assert set(r["baselines"]) == {"parameters", "layers", "forward3x"}
    assert r["predicted_iteration_time"] <= min(r["baselines"].values()) + 1e-12
    assert set(r["cp_imbalance"]) == {"uniform", "zigzag", "lpt"} and r["cp_mode"] in r["cp_imbalance"]
    assert {a.name for a in plan.artifacts} == {"plan.json", "timeline.png"}


def test_train_from_the_plan_on_two_processes(client, plan, tmp_path):
    from paperworks.services.training import checkpoint

    job = client.submit("training", "train", plan_job_id=plan.id, steps=3)
    done = finished(client, job, timeout=180)
    r = done.result
    assert len(r["losses"]) == 3 and r["measured_iteration_time"] > 0 and r["tokens_per_s"] > 0
    assert len(r["stage_busy_s"]) == len(r["stage_bubble_s"]) == 2
    assert [s["layers"] for s in r["stages"]] == [s["layers"] for s in plan.result["stages"]]
    names = {a.name for a in done.artifacts}
    assert names == {"train.json", "timeline.png", "model.safetensors", "task.json"}
    events = list(client.watch(job.id, timeout=30))
    steps = {e.progress.step for e in events if e.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS
             and "tokens/s" in e.progress.message}
    assert steps and steps <= {1, 2, 3}  # per-step progress with loss, tokens/s, busy/bubble
    assert any("busy/bubble" in e.progress.message for e in events)
    ready = [e for e in events if e.type == jobs_pb2.JOB_EVENT_TYPE_MODEL_READY]
    assert len(ready) == 1
    [weights] = [a for a in done.artifacts if a.name == "model.safetensors"]
    path = client.pull_artifact(job.id, weights.sha256, tmp_path)
    model, meta = checkpoint.from_bytes(path.read_bytes())  # strict: both stages' layers are there
    assert meta["pattern"] == "frozen_encoder" and sum(p.numel() for p in model.parameters()) > 0
    ranks_rerun_the_task(client, job.id, done, tmp_path)


def ranks_rerun_the_task(client, job_id, done, tmp_path):
    """The multi-node form (infra/k8s/training-ranks.yaml) runs the job's task.json: its rank
    command, with the task folder read-only and the results in another, gives the job's losses."""
    import subprocess
    import sys

    import torch
    from paperworks.shared.devstack.deploy import RANK_COMMAND, RENDEZVOUS_PORT, k8s_training_ranks

    [task] = [a for a in done.artifacts if a.name == "task.json"]
    task_dir, runs = tmp_path / "task", tmp_path / "runs" / "current"
    client.pull_artifact(job_id, task.sha256, task_dir)
    task_dir.chmod(0o555)
    job_env = {e["name"]: e.get("value") for e in k8s_training_ranks()[-1]["spec"]["template"]["spec"][
        "containers"][0]["env"]}
    assert job_env["WORLD_SIZE"] == "2" and job_env["MASTER_ADDR"] == "training-ranks-0.training-ranks"
    command = [sys.executable if c == "python" else c for c in RANK_COMMAND]
    command = [str(task_dir) if c == "/task" else str(runs) if c == "/runs/current" else c for c in command]
    port = str(RENDEZVOUS_PORT + os.getpid() % 1000)
    procs = [subprocess.Popen(command, env={**os.environ, **{k: v for k, v in job_env.items() if v},
                                            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                            "RANK": str(r), "PYTHONSAFEPATH": "1"})
             for r in range(2)]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    last = torch.load(runs / "rank1.pt", weights_only=True)
    assert last["losses"] == pytest.approx(done.result["losses"], rel=1e-4)


def test_train_inline_plan_and_simulate(client, plan):
    job = client.submit(
        "training",
        "train",
        model=MODEL,
        pattern="frozen_llm_lora",
        method="layers",
        world_size=1,
        steps=2,
        microbatches=2,
        batch_size=4,
    )
    done = finished(client, job, timeout=180)
    assert done.result["method"] == "layers" and len(done.result["losses"]) == 2
    sim = finished(client, client.submit("training", "simulate", plan_job_id=plan.id, microbatches=4))
    assert sim.result["iteration_time"] > 0 and len(sim.result["bubble"]) == 2
    stages = [{"forward": 1.0, "backward": 0.0, "next": 1}, {"forward": 1.0, "backward": 2.0}]
    sim = finished(client, client.submit("training", "simulate", stages=stages, microbatches=4))
    assert sim.result["iteration_time"] == pytest.approx(13.0)


def test_plan_rpc_inline(client):
    request = training_pb2.PlanRequest(
        model=training_pb2.ModelDescription(llm_layers=4), pattern="frozen_encoder", world_size=2
    )
    reply = client.stub("training").Plan(request, metadata=client.metadata, timeout=30)
    assert len(reply.stages) == 2 and reply.stages[-1].next == -1
    assert reply.predicted_iteration_time <= min(reply.baselines.values()) + 1e-12
    with pytest.raises(grpc.RpcError) as exc:
        client.stub("training").Plan(
            training_pb2.PlanRequest(world_size=8), metadata=client.metadata, timeout=30
        )
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(exc.value)[0][0] == "world_size"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cancelled_train_reaps_its_workers(client):
    job = client.submit("training", "train", model=MODEL, steps=1000, pattern="all_trainable")
    pids = []
    for ev in client.watch(job.id, timeout=120):
        if ev.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS and ev.progress.stage == "training":
            pids = [int(p) for p in re.findall(r"\d+", ev.progress.message.split("pids")[-1])]
            if len(pids) == 2:
                break
    assert len(pids) == 2
    client.cancel(job.id)
    assert PROTO_TO_STATE[client.wait(job.id, timeout=60).state] == "CANCELLED"
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids)


def test_bad_requests_name_their_field(client):
    def refused(**params):
        with pytest.raises(grpc.RpcError) as exc:
            client.submit("training", **params)
        assert exc.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
        return field_violations(exc.value)

    assert refused(kind="train", world_size=9)[0][0] == "world_size"
    assert "divisible" in refused(kind="train", batch_size=6, microbatches=4)[0][1]
    assert refused(kind="train", plan_job_id="nope")[0][0] == "plan_job_id"
    assert "exactly one" in refused(kind="simulate")[0][1]


@pytest.fixture(scope="module")
def hf_model(client, tmp_path_factory) -> dict:
    """A model description of Hugging Face folders: the LLM uploaded as a .tar.gz (folder on top),
    the vision tower a server path."""
    root = tmp_path_factory.mktemp("hf")
    lm = llama(root / "llama")
    with tarfile.open(root / "llama.tar.gz", "w:gz") as tar:
        tar.add(lm, arcname="llama")
    sha = client.upload(root / "llama.tar.gz").artifact.sha256
    return {
        "encoders": [{"name": "vision", "hf": {"kind": "hf", "path": siglip_vision(root / "siglip")}}],
        "llm": {"kind": "hf", "source": {"upload": sha}},
        "text_tokens": 8,
        "vocab": 16,
    }


def test_hf_models_plan_train_and_plan_rpc(client, hf_model):
    job = client.submit(
        "training",
        "plan_parallelism",
        model=hf_model,
        pattern="frozen_encoder",
        world_size=2,
        cp_size=1,
        profile_repeats=1,
        microbatches=2,
        batch_size=4,
    )
    plan = finished(client, job, timeout=180)
    layers = [x for s in plan.result["stages"] for x in s["layers"]]
    assert layers == [f"vision:{i}" for i in range(4)] + [f"llm:{i}" for i in range(4)]  # 2 + 2 HF layers
    done = finished(client, client.submit("training", "train", plan_job_id=plan.id, steps=2), timeout=180)
    assert len(done.result["losses"]) == 2 and done.result["device"] == "cpu"
    sim = finished(client, client.submit("training", "simulate", plan_job_id=plan.id, microbatches=4))
    assert sim.result["iteration_time"] > 0 and len(sim.result["bubble"]) == 2
    request = training_pb2.PlanRequest(pattern="frozen_encoder", world_size=2)
    request.model.llm.kind = "hf"
    request.model.llm.source.upload = hf_model["llm"]["source"]["upload"]
    request.model.text_tokens = 8
    tower = request.model.encoders.add(name="vision").hf
    tower.kind, tower.path = "hf", hf_model["encoders"][0]["hf"]["path"]
    reply = client.stub("training").Plan(request, metadata=client.metadata, timeout=30)
    assert sum(len(s.layers) for s in reply.stages) == 8 and reply.stages[-1].next == -1


def test_hf_folders_are_refused_naming_their_field(client, hf_model, tmp_path):
    wrong = {**hf_model, "llm": {"kind": "hf", "path": hf_model["encoders"][0]["hf"]["path"]}}
    with pytest.raises(grpc.RpcError) as exc:
        client.submit("training", "plan_parallelism", model=wrong, world_size=2, cp_size=1)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(exc.value)[0][0] == "model.llm.source.path"
