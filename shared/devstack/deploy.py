"""Generates the production deployment from the service registry.

docker-compose.yml and infra/k8s/*.yaml are written by this module (`make
deploy-files`) and committed; a test regenerates them and fails on any
difference, so every registered service always has its server, dispatcher and
worker containers, and every setting the code reads is set.

Each server is published on the host port its spec names (`ServiceSpec.port`, e.g.
ops 50052:50051), fixed per service so that adding a service moves no other's port.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml
from paperworks.shared.registry import services

ROOT = Path(__file__).resolve().parents[2]
IMAGE_CPU = "paperworks:0.1.0-cpu"
IMAGE_CUDA = "paperworks:0.1.0-cuda"
GRPC_PORT = 50051
METRICS_PORT = 9100

COMMON_ENV = {
    # connect_timeout: a database that stops answering costs a call UNAVAILABLE after 5 s, never a hang
    # every process reaches PostgreSQL through PgBouncer in transaction mode: connections are
    # budgeted there (POOL_SIZE per database), not per process (docs/scaling.md)
    "PAPERWORKS_DATABASE_URL": (
        "postgresql+psycopg://paperworks:paperworks@pgbouncer:6432/paperworks?connect_timeout=5"),
    "PAPERWORKS_DB_PGBOUNCER": "true",
    "PAPERWORKS_DB_POOL_SIZE": "4",
    "PAPERWORKS_DB_MAX_OVERFLOW": "4",
    "PAPERWORKS_KAFKA_BOOTSTRAP_SERVERS": "kafka:9092",
    "PAPERWORKS_KAFKA_PARTITIONS": "4",
    "PAPERWORKS_CELERY_BROKER_URL": "redis://redis:6379/0",
    "PAPERWORKS_STATE_DIR": "/var/lib/paperworks",
    # artifacts and uploads live in S3 (MinIO here; a cloud bucket in production), so every
    # machine reads them without a shared volume
    "PAPERWORKS_S3_BUCKET": "paperworks",
    "PAPERWORKS_S3_ENDPOINT_URL": "http://minio:9000",
    "PAPERWORKS_S3_REGION": "us-east-1",
    "PAPERWORKS_GRPC_HOST": "0.0.0.0",
    "PAPERWORKS_GRPC_PORT": str(GRPC_PORT),
    "PAPERWORKS_METRICS_PORT": str(METRICS_PORT),
    "PAPERWORKS_LOG_LEVEL": "INFO",
}


# a worker container owns its GPU and memory whether it runs a job or not: its task process stays
# up between jobs (no fork, torch import and model load on the first job after an idle spell)
WORKER_ENV = {"PAPERWORKS_WORKER_IDLE_EXIT_S": "0"}
# migrations take session-level locks: they talk to PostgreSQL itself, not through the pooler
DIRECT_DATABASE_URL = "postgresql+psycopg://paperworks:paperworks@postgres:5432/paperworks?connect_timeout=5"
PGBOUNCER_IMAGE = "edoburu/pgbouncer:v1.23.1-p2"
PGBOUNCER_ENV = {
    "DB_HOST": "postgres", "DB_PORT": "5432", "DB_USER": "paperworks", "DB_PASSWORD": "paperworks",
    "DB_NAME": "paperworks", "LISTEN_PORT": "6432", "POOL_MODE": "transaction",
    "AUTH_TYPE": "scram-sha-256", "MAX_CLIENT_CONN": "4000", "DEFAULT_POOL_SIZE": "60",
    "SERVER_RESET_QUERY": "", "IGNORE_STARTUP_PARAMETERS": "extra_float_digits",
}
# session settings live on the server, since the pooler's clients send none
POSTGRES_COMMAND = ["postgres", "-c", "idle_in_transaction_session_timeout=60000",
                    "-c", "max_connections=200"]


def host_ports() -> dict[str, int]:
    """Each service's Compose host port, from its spec; refuses a missing or shared one."""
    ports, owner = {}, {}
    for name, spec in services().items():
        if spec.port is None:
            raise ValueError(
                f"service {name!r} has no host port: set `port=` in services/{name}/spec.py to the next "
                "free port (services/README.md step 10)")
        if spec.port in owner:
            raise ValueError(
                f"services {owner[spec.port]!r} and {name!r} both use host port {spec.port}: give "
                f"{name!r} the next free port in services/{name}/spec.py (services/README.md step 10)")
        owner[spec.port] = name
        ports[name] = spec.port
    return ports


def _probe(port: int = GRPC_PORT) -> dict:
    return {
        "test": ["CMD", "paperworks", "probe", f"127.0.0.1:{port}"],
        "interval": "10s",
        "timeout": "5s",
        "retries": 5,
        "start_period": "20s",
    }


MINIO_IMAGE = "minio/minio:RELEASE.2025-04-22T22-12-26Z"
MINIO_CLIENT_IMAGE = "minio/mc:RELEASE.2025-04-16T18-13-26Z"


def compose() -> dict:
    s3_credentials = {"AWS_ACCESS_KEY_ID": "${PAPERWORKS_S3_ACCESS_KEY:-paperworks}",
                      "AWS_SECRET_ACCESS_KEY": "${PAPERWORKS_S3_SECRET_KEY:-paperworks-secret}"}
    env = {**COMMON_ENV, **s3_credentials,
           "PAPERWORKS_AUTH_TOKENS": "${PAPERWORKS_AUTH_TOKENS:?set tenant:token pairs}",
           # services calling each other for a tenant (pipelines): the credential and the addresses
           "PAPERWORKS_INTERNAL_TOKEN": "${PAPERWORKS_INTERNAL_TOKEN:?set the services' internal "
                                        "credential}",
           "PAPERWORKS_ENDPOINTS": ",".join(f"{n}={n}-server:{GRPC_PORT}" for n in host_ports())}
    after_migrate = {"migrate": {"condition": "service_completed_successfully"},
                     "pgbouncer": {"condition": "service_healthy"},
                     "minio-bucket": {"condition": "service_completed_successfully"}}
    out: dict = {
        "name": "paperworks",
        "services": {
            "kafka": {
                "image": "apache/kafka:3.9.1",
                "environment": {
                    "KAFKA_NODE_ID": "1",
                    "KAFKA_PROCESS_ROLES": "broker,controller",
                    "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
                    "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka:9092",
                    "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
                    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka:9093",
                    "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
                    "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
                },
                "volumes": ["kafka-data:/var/lib/kafka/data"],
                "healthcheck": {
                    "test": ["CMD-SHELL", "/opt/kafka/bin/kafka-broker-api-versions.sh "
                             "--bootstrap-server localhost:9092 >/dev/null 2>&1"],
                    "interval": "10s", "timeout": "10s", "retries": 10,
                },
            },
            "postgres": {
                "image": "postgres:16.6",
                "command": POSTGRES_COMMAND,
                "environment": {"POSTGRES_USER": "paperworks", "POSTGRES_PASSWORD": "paperworks",
                                "POSTGRES_DB": "paperworks"},
                "volumes": ["pgdata:/var/lib/postgresql/data"],
                "healthcheck": {"test": ["CMD", "pg_isready", "-U", "paperworks"],
                                "interval": "5s", "timeout": "5s", "retries": 10},
            },
            "pgbouncer": {
                "image": PGBOUNCER_IMAGE,
                "environment": PGBOUNCER_ENV,
                "depends_on": {"postgres": {"condition": "service_healthy"}},
                "healthcheck": {"test": ["CMD", "pg_isready", "-h", "127.0.0.1", "-p", "6432"],
                                "interval": "5s", "timeout": "5s", "retries": 10},
            },
            "redis": {
                "image": "redis:7.4",
                "command": ["redis-server", "--appendonly", "yes"],
                "volumes": ["redis-data:/data"],
                "healthcheck": {"test": ["CMD", "redis-cli", "ping"], "interval": "5s",
                                "timeout": "5s", "retries": 10},
            },
            "minio": {
                "image": MINIO_IMAGE,
                "command": ["server", "/data", "--console-address", ":9001"],
                "environment": {"MINIO_ROOT_USER": s3_credentials["AWS_ACCESS_KEY_ID"],
                                "MINIO_ROOT_PASSWORD": s3_credentials["AWS_SECRET_ACCESS_KEY"]},
                "volumes": ["minio-data:/data"],
                "healthcheck": {"test": ["CMD", "mc", "ready", "local"], "interval": "5s",
                                "timeout": "5s", "retries": 10},
            },
            "minio-bucket": {
                "image": MINIO_CLIENT_IMAGE,
                "depends_on": {"minio": {"condition": "service_healthy"}},
                "environment": s3_credentials,
                "entrypoint": ["/bin/sh", "-c",
                               "mc alias set store http://minio:9000 \"$$AWS_ACCESS_KEY_ID\" "
                               "\"$$AWS_SECRET_ACCESS_KEY\" && mc mb --ignore-existing store/paperworks"],
                "restart": "on-failure",
            },
            "migrate": {
                "image": IMAGE_CPU,
                "build": {"context": ".", "dockerfile": "infra/docker/Dockerfile",
                          "target": "cpu"},
                "command": ["paperworks", "migrate"],
                "environment": {**env, "PAPERWORKS_DATABASE_URL": DIRECT_DATABASE_URL},
                "depends_on": {"postgres": {"condition": "service_healthy"},
                               "kafka": {"condition": "service_healthy"}},
                "restart": "on-failure",
            },
        },
        "volumes": {"pgdata": {}, "kafka-data": {}, "redis-data": {}, "minio-data": {},
                    "training-runs": {}},
    }
    svc = out["services"]
    for name, port in host_ports().items():
        common = {"environment": env, "restart": "unless-stopped"}
        svc[f"{name}-server"] = {
            "image": IMAGE_CPU, "command": ["paperworks", "serve", name],
            "ports": [f"{port}:{GRPC_PORT}"], "healthcheck": _probe(),
            "depends_on": after_migrate, **common,
        }
        svc[f"{name}-dispatcher"] = {
            "image": IMAGE_CPU, "command": ["paperworks", "dispatch", name],
            "depends_on": {**after_migrate, "redis": {"condition": "service_healthy"}}, **common,
        }
        worker = {"command": ["paperworks", "work", name],
                  "depends_on": {**after_migrate, "redis": {"condition": "service_healthy"}},
                  **common, "environment": {**env, **WORKER_ENV}}
        svc[f"{name}-worker"] = {
            "image": IMAGE_CUDA,
            "build": {"context": ".", "dockerfile": "infra/docker/Dockerfile", "target": "cuda"},
            "profiles": ["gpu"],
            "deploy": {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]}}},
            **worker,
        }
        svc[f"{name}-worker-cpu"] = {"image": IMAGE_CPU, "profiles": ["cpu"], **worker}
    svc["console"] = console_container()
    svc.update(compose_training_ranks())
    return out


CONSOLE_PORT = 8080


def console_container() -> dict:
    """The web console: a gRPC client of every server (each person logs in with their token)."""
    return {
        "image": IMAGE_CPU,
        "command": ["paperworks", "console", "--host", "0.0.0.0", "--port", str(CONSOLE_PORT)],
        "ports": [f"{CONSOLE_PORT}:{CONSOLE_PORT}"],
        "environment": {
            "PAPERWORKS_ENDPOINTS": ",".join(f"{n}={n}-server:{GRPC_PORT}" for n in host_ports()),
            "PAPERWORKS_CONSOLE_SECRET": "${PAPERWORKS_CONSOLE_SECRET:-}",
        },
        "healthcheck": {"test": ["CMD", "python", "-c", "import urllib.request; urllib.request."
                                 f"urlopen('http://127.0.0.1:{CONSOLE_PORT}/healthz', timeout=4)"],
                        "interval": "10s", "timeout": "5s", "retries": 5, "start_period": "10s"},
        "restart": "unless-stopped",
    }


def k8s_console() -> list[dict]:
    """The console's Deployment and Service (put an Ingress with TLS in front of it)."""
    labels = {"app.kubernetes.io/name": "paperworks", "paperworks/role": "console"}
    probe = {"httpGet": {"path": "/healthz", "port": CONSOLE_PORT}, "periodSeconds": 10}
    env = [{"name": "PAPERWORKS_ENDPOINTS",
            "value": ",".join(f"{n}={n}:{GRPC_PORT}" for n in host_ports())},
           {"name": "PAPERWORKS_CONSOLE_SECRET", "valueFrom": {"secretKeyRef": {
               "name": "paperworks-secrets", "key": "PAPERWORKS_CONSOLE_SECRET"}}}]
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "console", "labels": labels},
         "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
                      "containers": [{
                          "name": "console", "image": IMAGE_CPU,
                          "command": ["paperworks", "console", "--host", "0.0.0.0",
                                      "--port", str(CONSOLE_PORT)],
                          "env": env, "ports": [{"name": "http", "containerPort": CONSOLE_PORT}],
                          "readinessProbe": probe, "livenessProbe": {**probe, "initialDelaySeconds": 10},
                          "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "console", "labels": labels},
         "spec": {"selector": labels,
                  "ports": [{"name": "http", "port": CONSOLE_PORT, "targetPort": "http"}]}},
    ]


def k8s(name: str) -> list[dict]:
    """Server Deployment + Service + HPA, dispatcher Deployment, worker Deployment + HPA."""
    labels = lambda role: {"app.kubernetes.io/name": "paperworks",  # noqa: E731
                           "paperworks/service": name, "paperworks/role": role}
    env_from = [{"configMapRef": {"name": "paperworks-config"}},
                {"secretRef": {"name": "paperworks-secrets"}}]
    # artifacts live in S3 (paperworks-config names the bucket and endpoint); each pod keeps only
    # a scratch cache of what it read
    volume = [{"name": "scratch", "emptyDir": {}}]
    mount = [{"name": "scratch", "mountPath": "/var/lib/paperworks"}]
    probe = {"grpc": {"port": GRPC_PORT}, "periodSeconds": 10}

    def deployment(role: str, image: str, command: list[str], extra: dict) -> dict:
        return {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"{name}-{role}", "labels": labels(role)},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels(role)},
                "template": {
                    "metadata": {"labels": labels(role)},
                    "spec": {
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
                        "terminationGracePeriodSeconds": 30,
                        "volumes": volume,
                        "containers": [{"name": role, "image": image, "command": command,
                                        "envFrom": env_from, "volumeMounts": mount, **extra}],
                    },
                },
            },
        }

    def hpa(role: str, max_replicas: int) -> dict:
        return {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": f"{name}-{role}", "labels": labels(role)},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                   "name": f"{name}-{role}"},
                "minReplicas": 1, "maxReplicas": max_replicas,
                "metrics": [{"type": "Resource", "resource": {
                    "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}],
            },
        }

    server_extra = {
        "ports": [{"name": "grpc", "containerPort": GRPC_PORT},
                  {"name": "metrics", "containerPort": METRICS_PORT}],
        "readinessProbe": probe, "livenessProbe": {**probe, "initialDelaySeconds": 20},
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
    }
    worker_extra = {"resources": {"requests": {"cpu": "2", "memory": "8Gi"},
                                  "limits": {"nvidia.com/gpu": 1}},
                    "env": [{"name": k, "value": v} for k, v in WORKER_ENV.items()]}
    return [
        deployment("server", IMAGE_CPU, ["paperworks", "serve", name], server_extra),
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "labels": labels("server")},
         "spec": {"selector": labels("server"),
                  "ports": [{"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc"},
                            {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"}]}},
        hpa("server", 8),
        deployment("dispatcher", IMAGE_CPU, ["paperworks", "dispatch", name],
                   {"resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}),
        deployment("worker", IMAGE_CUDA, ["paperworks", "work", name], worker_extra),
        hpa("worker", 16),
    ]


TRAINING_RANKS = 2  # the multi-node form's world size (edit with the task's plan)
RENDEZVOUS_PORT = 29500
RANK_COMMAND = ["python", "-m", "paperworks.services.training.cornstarch.worker", "/task", "/runs/current"]


def k8s_training_ranks() -> list[dict]:
    """The training service's multi-node form: one `train` job's ranks as a Kubernetes indexed Job,
    one pod per rank (a GPU each), rendezvous at pod 0 through a headless Service. The ranks run
    the `task.json` a `train` job wrote (mount it as the `training-task` ConfigMap) and write their
    results to a shared ReadWriteMany volume."""
    name = "training-ranks"
    labels = {"app.kubernetes.io/name": "paperworks", "paperworks/service": "training",
              "paperworks/role": "rank"}
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    env = [{"name": "MASTER_ADDR", "value": f"{name}-0.{name}"},
           {"name": "MASTER_PORT", "value": str(RENDEZVOUS_PORT)},
           {"name": "WORLD_SIZE", "value": str(TRAINING_RANKS)},
           {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": index}}},
           {"name": "LOCAL_RANK", "value": "0"},  # one GPU per pod
           {"name": "OMP_NUM_THREADS", "value": "1"}]
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels},
         "spec": {"clusterIP": "None", "selector": {"job-name": name},
                  "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT}]}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "labels": labels},
         "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "20Gi"}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
         "spec": {
             "completionMode": "Indexed", "completions": TRAINING_RANKS, "parallelism": TRAINING_RANKS,
             "backoffLimit": 0,  # one rank failing fails the run, as the embedded launcher does
             "template": {
                 "metadata": {"labels": labels},
                 "spec": {
                     "subdomain": name, "restartPolicy": "Never",
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
                     "volumes": [{"name": "task", "configMap": {"name": "training-task"}},
                                 {"name": "runs", "persistentVolumeClaim": {"claimName": name}}],
                     "containers": [{
                         "name": "rank", "image": IMAGE_CUDA, "command": RANK_COMMAND, "env": env,
                         "ports": [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}],
                         "volumeMounts": [{"name": "task", "mountPath": "/task", "readOnly": True},
                                          {"name": "runs", "mountPath": "/runs"}],
                         "resources": {"requests": {"cpu": "4", "memory": "16Gi"},
                                       "limits": {"nvidia.com/gpu": 1}}}]}}}},
    ]


def compose_training_ranks() -> dict[str, dict]:
    """The same form in Compose (profile `training-ranks`): one container per rank, rank 0 the
    rendezvous; on several hosts, give each rank's container its host and MASTER_ADDR rank 0's."""
    ranks = {}
    for rank in range(TRAINING_RANKS):
        ranks[f"training-rank-{rank}"] = {
            "image": IMAGE_CUDA, "profiles": ["training-ranks"], "command": RANK_COMMAND,
            "environment": {"MASTER_ADDR": "training-rank-0", "MASTER_PORT": str(RENDEZVOUS_PORT),
                            "WORLD_SIZE": str(TRAINING_RANKS), "RANK": str(rank), "LOCAL_RANK": "0",
                            "OMP_NUM_THREADS": "1"},
            "volumes": ["${PAPERWORKS_TRAINING_TASK:-./task}:/task:ro", "training-runs:/runs"],
            "deploy": {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]}}},
        }
    return ranks


def k8s_config() -> list[dict]:
    config = {**COMMON_ENV,
              "PAPERWORKS_ENDPOINTS": ",".join(f"{n}={n}:{GRPC_PORT}" for n in host_ports())}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "paperworks-config"},
         "data": config},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "paperworks-secrets"},
         "type": "Opaque",
         "stringData": {"PAPERWORKS_AUTH_TOKENS": "tenant:sha256:<hex of the tenant's token>",
                        "AWS_ACCESS_KEY_ID": "<access key of the artifact bucket>",
                        "AWS_SECRET_ACCESS_KEY": "<secret key of the artifact bucket>",
                        "PAPERWORKS_CONSOLE_SECRET": "<random text signing the web console's sessions>",
                        "PAPERWORKS_INTERNAL_TOKEN": "<random text: the credential services call "
                                                     "each other with for a tenant>"}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "paperworks-migrate"},
         "spec": {"backoffLimit": 10, "template": {"spec": {
             "restartPolicy": "OnFailure",
             "containers": [{"name": "migrate", "image": IMAGE_CPU,
                             "command": ["paperworks", "migrate"],
                             "env": [{"name": "PAPERWORKS_DATABASE_URL",
                                      "value": DIRECT_DATABASE_URL}],
                             "envFrom": [{"configMapRef": {"name": "paperworks-config"}},
                                         {"secretRef": {"name": "paperworks-secrets"}}]}]}}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pgbouncer"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "pgbouncer"}},
                  "template": {"metadata": {"labels": {"app": "pgbouncer"}}, "spec": {
                      "containers": [{
                          "name": "pgbouncer", "image": PGBOUNCER_IMAGE,
                          "env": [{"name": k, "value": v} for k, v in PGBOUNCER_ENV.items()],
                          "ports": [{"containerPort": 6432}],
                          "readinessProbe": {"tcpSocket": {"port": 6432}, "periodSeconds": 5},
                      }]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pgbouncer"},
         "spec": {"selector": {"app": "pgbouncer"}, "ports": [{"port": 6432, "targetPort": 6432}]}},
    ]


HEADER = "# Generated by `make deploy-files` (paperworks.shared.devstack.deploy); edit the generator.\n"


def dump(docs: list[dict] | dict) -> str:
    if isinstance(docs, dict):
        return HEADER + yaml.safe_dump(docs, sort_keys=False, width=100)
    return HEADER + yaml.safe_dump_all(docs, sort_keys=False, width=100)


def files() -> dict[Path, str]:
    out = {ROOT / "docker-compose.yml": dump(compose()),
           ROOT / "infra/k8s/config.yaml": dump(k8s_config()),
           ROOT / "infra/k8s/console.yaml": dump(k8s_console()),
           ROOT / "infra/k8s/training-ranks.yaml": dump(k8s_training_ranks())}
    for name in services():
        out[ROOT / f"infra/k8s/{name}.yaml"] = dump(k8s(name))
    return out


def write() -> None:
    for path, text in files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


if __name__ == "__main__":
    try:
        write()
    except ValueError as exc:  # a service without its own host port: say which and what to do
        sys.exit(f"error: {exc}")
    sys.exit(0)
