"""The `paperworks` command: the stack (up/status/down), jobs (submit/watch/get/list/
cancel/artifacts), discovery (services/describe), sync calls (call), and the processes
containers run (serve/dispatch/work/migrate).

The job verbs need only the light install (`pip install paperworks`); the stack and process
verbs need the server extra (`pip install 'paperworks[server]'`) and say so when it is missing.
"""
from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path

import grpc
import typer
from paperworks.shared.errors import PaperworksError
from paperworks.shared.sdk.states import PROTO_TO_STATE, state_name
from paperworks.v1 import jobs_pb2
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(help="paperworks: ICML 2026 methods as gRPC services.", no_args_is_help=True)
artifacts_app = typer.Typer(help="Job artifacts.", no_args_is_help=True)
app.add_typer(artifacts_app, name="artifacts")
pipeline_app = typer.Typer(help="Pipelines: one workflow of jobs across services.", no_args_is_help=True)
app.add_typer(pipeline_app, name="pipeline")
console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 1):
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _known_services(names: list[str]) -> list[str]:
    """`names`, or a one-line error naming those no service is registered under."""
    from paperworks.shared.registry import services

    unknown = sorted(set(names) - set(services()))
    if unknown:
        _fail(f"unknown service(s): {', '.join(unknown)} (known: {', '.join(services())})")
    return names


def _require_server() -> None:
    """The stack and process verbs run the platform itself: they need the server extra."""
    try:
        import paperworks.shared.config  # noqa: F401
        import paperworks.shared.devstack.stack  # noqa: F401
    except ImportError as exc:
        _fail(f"this command runs the platform itself and needs the server extra "
              f"(pip install 'paperworks[server]'): {exc}")


def get_settings():
    """The server's settings, for the stack and process verbs (server extra only)."""
    _require_server()
    from paperworks.shared.config import get_settings as server_settings

    return server_settings()


def _client():
    from paperworks.shared.sdk.client import Client

    return Client()


def _run(fn):
    """Turns platform and gRPC errors into one readable line and a non-zero exit."""
    from paperworks.shared.sdk.errors import field_violations

    try:
        return fn()
    except PaperworksError as exc:
        _fail(f"{exc.code}: {exc}")
    except grpc.RpcError as exc:
        fields = "; ".join(f"{f}: {d}" for f, d in field_violations(exc))
        _fail(f"{exc.code().name}: {exc.details()}" + (f" [{fields}]" if fields else ""))


def _sets(descriptor, sets: list[str]) -> dict:
    from paperworks.shared.sdk.values import params_from_sets

    return _run(lambda: params_from_sets(descriptor, sets))


def _state(job: jobs_pb2.Job) -> str:
    return state_name(job.state)


def _dict(message) -> dict:
    from paperworks.shared.sdk.values import message_json

    return message_json(message)


def _job_json(job: jobs_pb2.Job) -> str:
    return json.dumps(_dict(job), indent=1)


def _violations(error) -> str:
    return "".join(f"\n  {v.field}: {v.description}" for v in error.field_violations)


# --- jobs -----------------------------------------------------------------------------


@app.command()
def submit(
    service: str,
    kind: str,
    set_: list[str] = typer.Option([], "--set", help="A parameter, key=value: JSON, or text for a "
                                   "text field; @file reads a file (.npy or nested lists for tensors)."),
    input_: list[str] = typer.Option([], "--input", help="field=PATH: upload a local file or folder "
                                     "(sent as .tar.gz) and give it to an input field (dotted for a "
                                     "nested one: model.source)."),
    watch_: bool = typer.Option(False, "--watch", help="Follow the job until it ends."),
):
    """Submit a job: paperworks submit ops digest --set seed=1 --set steps=10
    (its parameters: paperworks describe SERVICE KIND)"""
    from paperworks.shared.sdk import discovery
    from paperworks.shared.sdk.values import merge_params, nested

    method = _run(lambda: discovery.submit_method(service, kind))
    params = _sets(method.input_type, set_)
    client = _client()
    for item in input_:
        field, sep, path = item.partition("=")
        if not sep or not field or not path:
            _fail(f"--input {item!r}: expected field=PATH")
        reply = _upload(client, Path(path), service)
        params = merge_params(params, nested(field, {"upload": reply.artifact.sha256}))
    job = _run(lambda: client.submit(service, kind, **params))
    console.print(job.id)
    if watch_:
        watch(job.id)


@app.command()
def watch(job_id: str = typer.Argument(..., help="A job id or a unique prefix of one.")):
    """Follow a job with a live progress bar until it ends: the time counts from submission, and
    the time spent queued and in each stage (model loading included) is printed at the end."""
    client = _client()
    job_id = _run(lambda: client.resolve(job_id))

    def follow():
        created = client.get(job_id).create_time.ToDatetime().timestamp()
        phases = Phases(created)
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                      TimeElapsedColumn(), console=console, transient=False) as bar:
            task = bar.add_task(job_id, total=1.0, info="")
            bar.tasks[0].start_time = bar.get_time() - max(0.0, time.time() - created)
            for ev in client.watch(job_id):
                state = PROTO_TO_STATE.get(ev.state, "?")
                phases.see(state, ev.progress.stage if ev.HasField("progress") else "",
                           ev.time.ToDatetime().timestamp())
                if ev.HasField("progress"):
                    info = ev.progress.message or f"{ev.progress.step}/{ev.progress.total_steps}"
                    stage = f"{ev.progress.stage}: " if ev.progress.stage else ""
                    bar.update(task, completed=ev.progress.fraction, info=f"{state} {stage}{info}")
                else:
                    bar.update(task, info=f"{state} {ev.message}".strip())
        return client.get(job_id), phases

    job, phases = _run(follow)
    state = _state(job)
    console.print(f"{job.id} {state}  ({phases.summary()})", highlight=False)
    if job.HasField("result") and job.result.fields:
        console.print_json(json.dumps(_dict(job.result)))
    if state == "FAILED":
        _fail(f"{job.error.message}{_violations(job.error)}", 2)


class Phases:
    """Where a job's time went, from its events: queued (submission to the first RUNNING), then
    each stage the job reported (a cold worker's model loading shows as its own stage)."""

    def __init__(self, created: float):
        self.created, self.last, self.current = created, created, "queued"
        self.spent: dict[str, float] = {}

    def see(self, state: str, stage: str, at: float) -> None:
        phase = "queued" if state == "QUEUED" else (stage or "running") if state == "RUNNING" else None
        if phase == self.current:
            return
        self.spent[self.current] = self.spent.get(self.current, 0.0) + max(0.0, at - self.last)
        self.last, self.current = at, phase or "done"

    def summary(self) -> str:
        parts = [f"{name} {seconds:.1f}s" for name, seconds in self.spent.items() if name != "done"]
        return ", ".join(parts) or "no events"


@app.command()
def get(job_id: str = typer.Argument(..., help="A job id or a unique prefix of one.")):
    """Show a job as JSON."""
    client = _client()
    job = _run(lambda: client.get(client.resolve(job_id)))
    console.print_json(_job_json(job))


@app.command("list")
def list_(
    service: str,
    kind: str = typer.Option("", help="Only this job kind."),
    state: list[str] = typer.Option([], help="Only these states (QUEUED, RUNNING, ...)."),
    page_size: int = typer.Option(50),
    page_token: str = typer.Option(""),
    json_: bool = typer.Option(False, "--json", help="One JSON object per job, for scripts."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Job ids only, one per line."),
):
    """List a service's jobs, newest first."""
    jobs, token = _run(lambda: _client().list(service, kind, state, page_size, page_token))
    if quiet or json_:
        for j in jobs:
            print(j.id if quiet else json.dumps(_dict(j)))
        return
    table = Table("id", "kind", "state", "progress", "created", "pipeline")
    table.columns[0].no_wrap = True  # ids are copied whole, never cut
    for j in jobs:
        table.add_row(j.id, j.kind, _state(j), f"{j.progress.fraction:.0%}",
                      j.create_time.ToDatetime().isoformat(timespec="seconds"), j.parent_job_id)
    console.print(table)
    if token:
        console.print(f"next page: --page-token {token}")


@app.command()
def cancel(job_id: str = typer.Argument(..., help="A job id or a unique prefix of one.")):
    """Cancel a job (QUEUED ends now; RUNNING stops at its next step)."""
    client = _client()
    job = _run(lambda: client.cancel(client.resolve(job_id)))
    console.print(f"{job.id} {_state(job)}" + (" (cancel requested)" if job.cancel_requested else ""))


def _pipeline_steps(path: Path) -> list[dict]:
    """A pipeline file's steps: JSON, or YAML where PyYAML is installed (`steps:` at the top)."""
    if not path.is_file():
        _fail(f"{path}: no such file")
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            _fail(f"{path}: reading YAML needs PyYAML (pip install pyyaml); or write it as JSON")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            _fail(f"{path}: not valid YAML: {exc}")
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            _fail(f"{path}: not valid JSON: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        _fail(f"{path}: a pipeline is a mapping with a list of `steps`")
    return data["steps"]


@pipeline_app.command("run")
def pipeline_run(
    file: Path = typer.Argument(..., help="A pipeline file (YAML or JSON): steps with name, service, "
                                "kind, params (a reference: {from: STEP, artifact|model|job_id|result})."),
    watch_: bool = typer.Option(False, "--watch", help="Follow the pipeline until it ends."),
    key: str = typer.Option("", "--idempotency-key", help="Running the same file with the same key "
                            "returns the first pipeline."),
):
    """Run a pipeline: paperworks pipeline run examples/pipelines/denoise-segment.yaml --watch"""
    steps = _pipeline_steps(file)
    job = _run(lambda: _client().run_pipeline(steps, key))
    console.print(job.id)
    if watch_:
        watch(job.id)


@pipeline_app.command("validate")
def pipeline_validate(file: Path = typer.Argument(..., help="A pipeline file (YAML or JSON).")):
    """Validate a pipeline as running it would (every step asked of its service), creating nothing."""
    steps = _pipeline_steps(file)
    order = _run(lambda: _client().validate_pipeline(steps))
    console.print("valid; the steps run in this order: " + " -> ".join(order), highlight=False)


@artifacts_app.command("pull")
def artifacts_pull(job_id: str, out: Path = typer.Option(Path("."), help="Destination folder.")):
    """Download every artifact of a job (hash-checked)."""
    client = _client()
    paths = _run(lambda: client.pull_artifacts(client.resolve(job_id), out))
    for p in paths:
        console.print(str(p))


@app.command()
def upload(
    path: Path,
    service: str = typer.Option("", help="The service whose endpoint receives it (any: uploads are "
                                "per tenant, not per service)."),
    media_type: str = typer.Option("", help="e.g. application/gzip; empty: guessed from the name."),
):
    """Upload a file or folder (sent as .tar.gz) for your jobs; prints its sha256, which job inputs
    name as {"upload": "<sha256>"} (or `paperworks submit ... --input field=PATH` in one step)."""
    reply = _upload(_client(), path, service or None, media_type)
    console.print(reply.artifact.sha256)


def _upload(client, path: Path, service: str | None, media_type: str = ""):
    """Uploads `path` with a progress bar on stderr; the reply (its artifact's sha256 names it)."""
    with Progress(TextColumn(str(path)), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err) as bar:
        task = bar.add_task("upload", total=None)
        reply = _run(lambda: client.upload(path, service, media_type,
                                           progress=lambda sent, total: bar.update(task, completed=sent,
                                                                                   total=total)))
    err.print(f"{reply.artifact.name}: {reply.artifact.size_bytes} bytes (sha256 {reply.artifact.sha256}), "
              f"expires {reply.expire_time.ToDatetime().isoformat(timespec='seconds')}Z unless a job "
              "uses it", highlight=False)
    return reply


# --- discovery and sync calls ---------------------------------------------------------------


@app.command()
def services():
    """Each service of the stack: its job kinds and sync RPCs, one line each."""
    client = _client()
    table = Table("service", "job kinds", "sync RPCs", "what it does")
    for name in sorted(client.endpoints):
        d = _run(lambda name=name: client.describe(name))
        table.add_row(name, ", ".join(k.name for k in d.kinds), ", ".join(r.name for r in d.rpcs),
                      d.description)
    console.print(table)


@app.command()
def describe(service: str, name: str = typer.Argument("", help="A job kind or a sync RPC; empty: all.")):
    """A job kind's parameters (type, default, range or allowed values, required) with an example,
    or a sync RPC's request fields; from the schema the server validates with."""
    from paperworks.shared.sdk import describe as text

    d = _run(lambda: _client().describe(service))
    kinds = {k.name: k for k in d.kinds}
    rpcs = {r.name: r for r in d.rpcs}
    if not name:
        console.print(text.service_text(d), highlight=False, markup=False)
    elif name in kinds:
        console.print(text.kind_text(service, kinds[name]), highlight=False, markup=False)
    elif name in rpcs:
        console.print(text.rpc_text(service, rpcs[name]), highlight=False, markup=False)
    else:
        _fail(f"service {service!r} has no job kind or RPC {name!r} (kinds: {', '.join(kinds)}; "
              f"RPCs: {', '.join(rpcs)})")


@app.command()
def call(
    service: str,
    rpc: str,
    set_: list[str] = typer.Option([], "--set", help="A request field, key=value (as for submit)."),
    out: Path | None = typer.Option(None, help="Write the reply's tensors (.npy) and binary fields "
                                    "(volumes, images) here as files."),
):
    """Call a sync RPC: paperworks call urban Embed --set ... (its fields: paperworks describe SERVICE RPC)"""
    from paperworks.shared.sdk import discovery
    from paperworks.shared.sdk.values import bytes_fields, write_npy

    method = _run(lambda: discovery.rpc_method(service, rpc))
    params = _sets(method.input_type, set_)
    reply = _run(lambda: _client().call(service, rpc, **params))
    replies = reply if isinstance(reply, list) else [reply]
    data = [_dict(r) for r in replies]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for i, (message, item) in enumerate(zip(replies, data, strict=True)):
            nth = "" if len(data) == 1 else f".{i}"
            for path, tensor in _tensors(item, ""):
                target = out / f"{path or 'tensor'}{nth}.npy"
                target.write_bytes(write_npy(tensor))
                tensor.clear()
                tensor["written_to"] = str(target)
            for path, suffix, holder, key in list(bytes_fields(message.DESCRIPTOR, item)):
                target = out / f"{path}{nth}{suffix}"
                target.write_bytes(base64.b64decode(holder[key]))
                holder[key] = {"written_to": str(target)}
    console.print_json(json.dumps(data[0] if len(data) == 1 else data))


def _tensors(value, path: str):
    """(dotted path, Tensor JSON dict) for every tensor in a reply's JSON form."""
    if isinstance(value, dict):
        if "dtype" in value and "shape" in value:
            yield path, value
            return
        for key, item in value.items():
            yield from _tensors(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{path}.{i}")


# --- the embedded stack ----------------------------------------------------------------


@app.command()
def up(
    service: list[str] = typer.Option([], help="Only these services (default: all)."),
    base_port: int | None = typer.Option(None, help="Fixed ports from here (default: free)."),
):
    """Start every service locally: one process serving their gRPC APIs, a worker pool each, one
    dispatcher process for all, Kafka, Redis and the web console."""
    _require_server()
    from paperworks.shared.devstack.stack import EmbeddedStack, StackError
    from paperworks.shared.registry import services

    names = _known_services(service or list(services()))
    try:
        stack = EmbeddedStack(get_settings(), names, base_port)
        with console.status("starting the embedded stack"):
            state = stack.up()
    except StackError as exc:
        _fail(str(exc))
    for name, s in state.services.items():
        console.print(f"{name:12s} {s['host']}:{s['port']}")
    from paperworks.shared.devstack.stack import console_url

    if console_url(state):
        console.print(f"{'console':12s} {console_url(state)}  (log in with your API token)")
        if state.env.get("PAPERWORKS_AUTH_TOKENS") == f"local:{state.token}":  # the stack's own
            console.print(f"{'token':12s} {state.token}")
    console.print(f"state: {get_settings().state_dir}  (paperworks status · paperworks down)")


@app.command()
def status():
    """Each process of the embedded stack: alive, ready, gRPC health."""
    _require_server()
    from paperworks.shared.devstack.processes import SERVERS
    from paperworks.shared.devstack.stack import StackError, attach, is_ready, running

    try:
        stack = attach(get_settings())
    except StackError as exc:
        _fail(str(exc))
    table = Table("component", "pid", "port", "alive", "ready", "health", "device · kernels")
    healthy = True
    for name, comp in stack.state.components.items():
        alive = running(comp)
        ready = alive and is_ready(get_settings(), comp)
        # the one process serving every service's API: a row per service, each health-checked
        rows = ([(f"{svc}.server", s["port"]) for svc, s in stack.state.services.items()]
                if name == SERVERS else [(name, comp.port)])
        for row, port in rows:
            health = _health(port) if name == SERVERS and alive else "-"
            healthy &= alive and ready and health in ("SERVING", "-")
            table.add_row(row, str(comp.pid), str(port or "-"), "yes" if alive else "NO",
                          "yes" if ready else "no", health, _device(row))
    console.print(table)
    if not healthy:
        raise typer.Exit(1)


def _device(component: str) -> str:
    """What the process published (`processes.publish_device`): its device and each kernel op's
    backend, "reference" marking an op that runs without its compiled kernel."""
    from paperworks.shared.devstack.processes import device_file

    path = device_file(get_settings(), component)
    if not component.endswith((".server", ".worker")):
        return "-"
    if not path.exists():  # a server loads its methods (and says where) on its first call
        return "idle (loads on first call)" if component.endswith(".server") else "pending"
    report = json.loads(path.read_text())
    if "error" in report:
        return f"KERNELS UNAVAILABLE: {report['error']}"
    kernels = ", ".join(f"{op}={backend}" for op, backend in report["kernels"].items())
    return report["device"] + (f" · {kernels}" if kernels else "")


def _health(port: int, host: str = "127.0.0.1") -> str:
    """The server's grpc.health.v1 status, over TLS when the client settings configure it."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from paperworks.shared.sdk.channels import channel, channel_credentials
    from paperworks.shared.sdk.config import ClientConfig

    try:
        with channel(f"{host}:{port}", channel_credentials(ClientConfig.from_env())) as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=2)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    except grpc.RpcError as exc:
        return exc.code().name


@app.command()
def probe(address: str = typer.Argument("127.0.0.1:50051", help="host:port of a server.")):
    """Exit 0 when the server at ADDRESS reports SERVING (container health checks)."""
    _require_server()
    host, _, port = address.rpartition(":")
    status_name = _health(int(port), host or "127.0.0.1")
    console.print(status_name)
    if status_name != "SERVING":
        raise typer.Exit(1)


@app.command()
def down():
    """Stop the embedded stack."""
    _require_server()
    from paperworks.shared.devstack.stack import StackError, attach

    try:
        stack = attach(get_settings())
    except StackError as exc:
        _fail(str(exc))
    stack.down()
    console.print("stopped")


# --- processes (what containers run) ------------------------------------------------------


@app.command()
def serve(
    services: list[str] = typer.Argument(..., metavar="SERVICE..."),
    ports: str = typer.Option(
        "", help="NAME=PORT,... : serve several services in this process, each on its port "
        "(the embedded stack's form); one service alone listens on PAPERWORKS_GRPC_PORT."),
):
    """Run services' gRPC servers (each hands its submitted jobs to Celery itself)."""
    _require_server()
    from paperworks.shared.devstack import processes

    _known_services(services)
    by_name = None
    if ports:
        try:
            by_name = {name: int(port) for name, port in
                       (item.split("=", 1) for item in ports.split(","))}
        except ValueError:
            _fail(f"--ports: expected NAME=PORT,... , got {ports!r}")
        missing = [name for name in services if name not in by_name]
        if missing:
            _fail(f"--ports names no port for {', '.join(missing)}")
    elif len(services) > 1:
        _fail("several services in one process need --ports NAME=PORT,...")
    processes.serve(get_settings(), services, by_name)


@app.command()
def dispatch(services: list[str] = typer.Argument(..., metavar="SERVICE...")):
    """Run services' dispatchers (Kafka intake → Celery, for jobs no server handed over) and
    their outbox relays (database → Kafka), one process for all the services named."""
    _require_server()
    from paperworks.shared.devstack import processes

    _known_services(services)
    processes.dispatch(get_settings(), services)


@app.command()
def work(service: str):
    """Run a service's Celery worker pool."""
    _require_server()
    from paperworks.shared.devstack import processes

    processes.work(get_settings(), service)


@app.command("console")
def web_console(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0 in a container)."),
    port: int = typer.Option(8080, help="HTTP port."),
    secret: str = typer.Option("", envvar="PAPERWORKS_CONSOLE_SECRET", show_default=False,
                               help="Signs the session cookies (replicas share it); default: random."),
):
    """Serve the web console: services, jobs, live progress, results and pictures in a browser.
    It calls the services' gRPC API with the token each person pastes at log-in."""
    try:
        from paperworks.shared.console.app import serve
    except ImportError as exc:
        _fail(f"the console needs the server extra (pip install 'paperworks[server]'): {exc}")
    from paperworks.shared.sdk.config import ClientConfig, resolve_endpoints

    if not resolve_endpoints(ClientConfig.from_env())[0]:
        _fail("no services to show: start the stack (`paperworks up`) or set PAPERWORKS_ENDPOINTS")
    console.print(f"console on http://{host}:{port}/")
    serve(host, port, secret or None)


@app.command()
def migrate():
    """Apply the database migrations, then create the Kafka topics."""
    _require_server()
    from paperworks.shared.bus.kafka import ensure_topics
    from paperworks.shared.db.migrate import upgrade
    from paperworks.shared.registry import services

    settings = get_settings()
    upgrade(settings.sqlalchemy_url)
    ensure_topics(settings, list(services()))
    console.print("migrated; topics exist")


if __name__ == "__main__":
    sys.exit(app())
