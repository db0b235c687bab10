"""Every setting is one PAPERWORKS_* environment variable, read in one place.

The embedded stack and production run the same code; only these values differ.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAPERWORKS_", extra="ignore")

    state_dir: Path = Field(
        default=Path.home() / ".paperworks",
        description="Embedded stack: database, artifacts, logs and the process table.",
    )
    database_url: str = Field(
        default="",
        description="SQLAlchemy URL; empty means SQLite in state_dir.",
    )
    kafka_bootstrap_servers: str = Field(
        default="127.0.0.1:9092", description="Kafka brokers, comma-separated host:port."
    )
    kafka_partitions: int = Field(default=4, ge=1, description="Partitions per jobs topic.")
    kafka_session_timeout_ms: int = Field(
        default=6000, ge=1000, description="Dispatcher consumer-group session (a join takes ~half)."
    )
    celery_broker_url: str = Field(
        default="redis://127.0.0.1:6379/0", description="Celery broker (Redis)."
    )
    celery_key_prefix: str = Field(default="", description="Redis key prefix for the Celery broker.")
    celery_visibility_timeout_s: int = Field(
        default=3600, ge=1, description="Redelivery of tasks whose whole worker died."
    )
    worker_concurrency: int = Field(default=1, ge=1, description="Task processes per worker pool.")
    worker_idle_exit_s: float = Field(
        default=300, ge=0, description="A worker pool's task processes exit after this long without "
        "a job, and the next job starts one again (an idle pool then holds no task process, nor the "
        "models and torch one loaded); 0 keeps them running for good."
    )
    artifact_root: Path | None = Field(default=None, description="Empty means state_dir/artifacts.")
    artifact_fsync: bool | None = Field(
        default=None, description="fsync each artifact written to the filesystem store before its job "
        "records it. Empty: as durable as the database's commits (yes on PostgreSQL; no on the embedded "
        "SQLite, whose WAL commits are not synced either: a crashed process loses neither, a power cut "
        "may lose both)."
    )
    s3_bucket: str = Field(default="", description="Artifacts and uploads in this S3 bucket (any "
                           "S3-compatible store); empty: the filesystem under artifact_root.")
    s3_endpoint_url: str = Field(default="", description="S3 endpoint, e.g. http://minio:9000; empty: AWS.")
    s3_region: str = Field(default="", description="S3 region; empty: boto3's default.")
    s3_prefix: str = Field(default="", description="Key prefix for every artifact in the bucket.")
    auth_tokens: str = Field(
        default="",
        description="Comma-separated tenant:token or tenant:sha256:<hex>; empty means dev mode.",
    )
    # --- service-to-service identity (pipelines) ---
    internal_token: str = Field(
        default="", description="The credential services use to call each other for a tenant (the "
        "pipeline submits its steps with it, naming the tenant in metadata); never a user's token. "
        "Empty: no internal calls (pipelines are refused when auth tokens are set).")
    grpc_host: str = Field(default="127.0.0.1", description="Address servers bind.")
    grpc_port: int = Field(default=50051, ge=0, le=65535, description="Port a server binds.")
    metrics_port: int = Field(default=0, ge=0, le=65535, description="0 disables /metrics.")
    max_message_bytes: int = Field(
        default=16 * 1024 * 1024, ge=1024, description="gRPC message limit; larger data travels in chunks."
    )
    job_lease_s: float = Field(
        default=10.0, gt=0, description="A RUNNING job whose heartbeat is older is taken over."
    )
    max_attempts: int = Field(default=5, ge=1, description="Executions of one job before FAILED.")
    task_soft_time_limit_s: int = Field(
        default=6 * 3600, ge=1, description="A job running longer FAILS with DEADLINE_EXCEEDED."
    )
    task_time_limit_s: int = Field(
        default=6 * 3600 + 300, ge=1, description="Hard limit: the task process is killed."
    )
    transient_retries: int = Field(
        default=3, ge=0, description="Retries (with backoff) of a job after a transient error."
    )
    requeue_after_s: float = Field(
        default=60.0, gt=0,
        description="A job QUEUED this long, or RUNNING with a lease expired this long, is announced again.",
    )
    relay_interval_s: float = Field(
        default=0.05, gt=0, description="Outbox poll interval of the relay (in the dispatcher's "
        "process; a job's start does not wait for it: servers hand jobs to Celery themselves)."
    )
    outbox_retention_s: float = Field(
        default=3600.0, gt=0, description="Outbox rows already published are deleted this long after."
    )
    event_retention_days: float = Field(
        default=0.0, ge=0, description="Events of jobs finished this long ago are deleted but the "
        "terminal one (WatchJob then replays only the end); 0 keeps them forever."
    )
    db_pool_size: int = Field(
        default=5, ge=1, description="PostgreSQL connections each process keeps open (per engine)."
    )
    db_max_overflow: int = Field(
        default=10, ge=0, description="PostgreSQL connections a process may open beyond the pool "
        "under bursts. Budget: (pool + overflow) x processes <= the server's or PgBouncer's limit."
    )
    db_pgbouncer: bool = Field(
        default=False, description="Connect through PgBouncer in transaction mode: no session "
        "settings in the startup packet (set them on the role: ALTER ROLE ... SET), none kept."
    )
    dispatcher_idle_poll_s: float = Field(
        default=0.25, gt=0,
        description="An idle dispatcher looks at Kafka this often even without the relay's nudge.",
    )
    endpoints: str = Field(
        default="", description="Client side: service=host:port,...; empty reads the stack file."
    )
    token: str = Field(default="", description="Client side: bearer token.")
    tls_cert_file: Path | None = Field(
        default=None,
        description="Server: PEM certificate chain; with tls_key_file, gRPC is served over TLS only.",
    )
    tls_key_file: Path | None = Field(default=None, description="Server: PEM private key of tls_cert_file.")
    tls_client_ca_file: Path | None = Field(
        default=None,
        description="Server: PEM CA bundle; set, every client must present a certificate it signed "
        "(mutual TLS).",
    )
    tls_ca_file: Path | None = Field(
        default=None,
        description="Client side: PEM CA bundle the servers' certificates chain to; set, clients use TLS.",
    )
    tls_client_cert_file: Path | None = Field(
        default=None, description="Client side: PEM certificate presented for mutual TLS."
    )
    tls_client_key_file: Path | None = Field(
        default=None, description="Client side: PEM private key of tls_client_cert_file."
    )
    data_root: str = Field(
        default="", description="Server paths in requests must lie under it (PAPERWORKS_<SERVICE>_DATA_ROOT "
        "overrides it for one service); empty: refused with auth tokens, the working directory in dev mode.")
    input_s3_buckets: str = Field(
        default="", description="Comma-separated buckets whose s3:// objects requests may name as inputs.")
    model_endpoints: str = Field(
        default="", description="Model endpoints tenants may name: JSON (or @file) of name -> {url, "
        "api_key_env, tenants}; keys are sent to these only.")
    raw_model_urls: str = Field(
        default="", description="Raw model URLs in tenants' requests: any, public (no loopback, link-local "
        "or private ranges, never with a key) or none; empty: any in dev mode, public with auth tokens.")
    max_upload_bytes: int = Field(
        default=2 * 1024**3, ge=1, description="Largest single upload (UploadArtifact); beyond is "
        "RESOURCE_EXHAUSTED.")
    upload_quota_bytes: int = Field(
        default=20 * 1024**3, ge=0, description="Bytes of uploads a tenant may hold at once; 0: no limit.")
    upload_ttl_s: float = Field(
        default=7 * 24 * 3600, gt=0, description="Seconds an upload lives unless a job uses it.")
    max_queued_jobs_per_tenant: int = Field(
        default=0, ge=0,
        description="A tenant's QUEUED jobs per service; a submit beyond is RESOURCE_EXHAUSTED; 0: no limit.",
    )
    max_active_jobs_per_tenant: int = Field(
        default=0, ge=0,
        description="A tenant's QUEUED + RUNNING jobs per service; a submit beyond is RESOURCE_EXHAUSTED; "
        "0: no limit.",
    )
    log_level: str = Field(default="INFO", description="Python logging level.")
    device: str = Field(
        default="", description="Device a worker's methods run on (cpu, cuda:N); empty: cuda:0 when a GPU "
        "is visible (CUDA_VISIBLE_DEVICES), else cpu.")

    @property
    def sqlalchemy_url(self) -> str:
        return self.database_url or f"sqlite:///{self.state_dir / 'paperworks.db'}"

    @property
    def artifacts_durable(self) -> bool:
        """Whether the filesystem artifact store syncs each blob (see `artifact_fsync`)."""
        if self.artifact_fsync is not None:
            return self.artifact_fsync
        return not self.sqlalchemy_url.startswith("sqlite")

    @property
    def artifacts_dir(self) -> Path:
        return self.artifact_root or self.state_dir / "artifacts"

    @property
    def stack_file(self) -> Path:
        return self.state_dir / "stack.json"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
