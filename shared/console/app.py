"""The console's ASGI app (FastAPI, server-rendered Jinja2 templates, one small script).

Every page is built from the services' public gRPC API, called with the token the person pasted
at log-in (kept in a signed, HttpOnly, SameSite=Strict cookie): the console has no token of its
own and no database, so a tenant sees exactly its jobs. gRPC statuses become pages a person can
act on: UNAUTHENTICATED sends back to log-in, UNAVAILABLE shows the service as down,
INVALID_ARGUMENT puts each violation next to the form field it names.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import secrets
from collections import OrderedDict
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote, urlencode

import grpc
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from google.protobuf import json_format
from itsdangerous import BadSignature, URLSafeTimedSerializer
from paperworks.shared.console import forms, summaries
from paperworks.shared.errors import InvalidArgument, NotFound, PaperworksError
from paperworks.shared.sdk.client import AsyncClient, service_of
from paperworks.shared.sdk.config import ClientConfig, resolve_endpoints
from paperworks.shared.sdk.errors import field_violations
from paperworks.shared.sdk.states import STATE_TO_PROTO, TERMINAL_STATES, state_name
from paperworks.v1 import jobs_pb2

HERE = Path(__file__).parent
COOKIE = "paperworks_console"
SESSION_MAX_AGE_S = 12 * 3600
PAGE_SIZES = (10, 25, 50, 100)
SINCE = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}
EVENT_TYPES = {v.number: v.name.removeprefix("JOB_EVENT_TYPE_")
               for v in jobs_pb2.JobEventType.DESCRIPTOR.values}
HEADERS = {  # every asset is the app's own: no CDN, no inline script or style
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                               "script-src 'self'; object-src 'none'; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


class LoginRequired(Exception):
    def __init__(self, reason: str = ""):
        self.reason = reason


class ServiceDown(Exception):
    def __init__(self, service: str, error: grpc.RpcError):
        self.service, self.error = service, error


def _dict(message) -> dict:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def _time(ts) -> str:
    if not ts.seconds and not ts.nanos:
        return ""
    return ts.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _number(value):
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return float(f"{value:.6g}") if math.isfinite(value) else value
    return value


def job_view(job: jobs_pb2.Job) -> dict:
    """A job as the templates read it."""
    state = state_name(job.state)
    return {
        "id": job.id, "service": job.service, "kind": job.kind, "state": state,
        "terminal": state in TERMINAL_STATES, "cancel_requested": job.cancel_requested,
        "attempts": job.attempts, "fraction": job.progress.fraction,
        "percent": round(100 * job.progress.fraction) if state != "SUCCEEDED" else 100,
        "stage": job.progress.stage, "message": job.progress.message,
        "step": job.progress.step, "total_steps": job.progress.total_steps,
        "params": _dict(job.params), "result": _dict(job.result),
        "error": {"code": job.error.code, "message": job.error.message} if job.error.message else None,
        "created": _time(job.create_time), "started": _time(job.start_time),
        "ended": _time(job.end_time), "updated": _time(job.update_time),
        "artifacts": [{"name": a.name, "sha256": a.sha256, "media_type": a.media_type,
                       "size": a.size_bytes, "image": summaries.is_image(a.name, a.media_type),
                       "summarisable": summaries.summarisable(a.name)} for a in job.artifacts],
    }


def event_view(event: jobs_pb2.JobEvent) -> dict:
    out = {"seq": event.seq, "type": EVENT_TYPES.get(event.type, str(event.type)),
           "state": state_name(event.state), "time": _time(event.time), "message": event.message}
    if event.HasField("progress"):
        out["progress"] = {"fraction": event.progress.fraction, "step": event.progress.step,
                           "total_steps": event.progress.total_steps, "stage": event.progress.stage,
                           "message": event.progress.message}
    if event.HasField("artifact"):
        out["artifact"] = {"name": event.artifact.name, "sha256": event.artifact.sha256}
    return out


def _table(value):
    """How a result value is drawn: ("scalar", v) | ("rows", columns, rows) | ("dict", items) |
    ("list", values)."""
    if isinstance(value, dict):
        return ("dict", [(k, _table(v)) for k, v in sorted(value.items())])
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            columns = list(dict.fromkeys(k for v in value for k in v))
            if len(columns) <= 12:
                rows = [[_cell(v.get(c, "")) for c in columns] for v in value[:200]]
                return ("rows", columns, rows, len(value))
        shown = ", ".join(str(_cell(v)) for v in value[:64])
        return ("list", shown + (f", … ({len(value)} in all)" if len(value) > 64 else ""))
    return ("scalar", _number(value))


def _cell(value):
    if isinstance(value, dict | list):
        text = json.dumps(value)
        return text if len(text) <= 120 else text[:117] + "…"
    return _number(value)


class Clients:
    """One AsyncClient (its channels) per token, the least recently used closed past `size`."""

    def __init__(self, endpoints: dict[str, str], config: ClientConfig, size: int = 64):
        self.endpoints, self.config, self.size = endpoints, config, size
        self._clients: OrderedDict[str, AsyncClient] = OrderedDict()

    def get(self, token: str) -> AsyncClient:
        key = hashlib.sha256(token.encode()).hexdigest()
        if key in self._clients:
            self._clients.move_to_end(key)
            return self._clients[key]
        client = AsyncClient(endpoints=self.endpoints, token=token, settings=self.config)
        self._clients[key] = client
        while len(self._clients) > self.size:
            _, old = self._clients.popitem(last=False)
            asyncio.get_running_loop().create_task(old.close())
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


def create_app(endpoints: dict[str, str] | None = None, secret: str | None = None,
               config: ClientConfig | None = None) -> FastAPI:
    """The console for `endpoints` (default: PAPERWORKS_ENDPOINTS or the embedded stack's file).
    `secret` signs the session cookie (`paperworks console` takes it from
    PAPERWORKS_CONSOLE_SECRET; default: random per process, which logs everyone out on restart,
    and which replicas behind one address cannot share)."""
    config = config or ClientConfig.from_env()
    if endpoints is None:
        endpoints, _ = resolve_endpoints(config)  # the stack's own token is never used
    secret = secret or secrets.token_urlsafe(32)
    signer = URLSafeTimedSerializer(secret, salt="paperworks-console-session")
    clients = Clients(dict(endpoints), config)
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.globals.update(services=sorted(endpoints), state_names=list(STATE_TO_PROTO))

    @asynccontextmanager
    async def lifespan(_app):
        yield
        await clients.close()

    app = FastAPI(title="paperworks console", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.state.clients = clients

    @app.middleware("http")
    async def _headers(request: Request, call_next):
        response = await call_next(request)
        for key, value in HEADERS.items():
            response.headers.setdefault(key, value)
        return response

    def page(request: Request, name: str, status: int = 200, **context) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"logged_in": _token(request) is not None,
                                                          **context}, status_code=status)

    def _token(request: Request) -> str | None:
        raw = request.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            return signer.loads(raw, max_age=SESSION_MAX_AGE_S)["token"]
        except (BadSignature, KeyError, TypeError):
            return None

    def client(request: Request) -> AsyncClient:
        token = _token(request)
        if token is None:
            raise LoginRequired()
        return clients.get(token)

    def known(service: str) -> str:
        if service not in endpoints:
            raise NotFound(f"no service {service!r} here (known: {', '.join(sorted(endpoints))})",
                           "service")
        return service

    # --- errors a person can act on ----------------------------------------------------------

    @app.exception_handler(LoginRequired)
    async def _login_required(request: Request, exc: LoginRequired):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        query = {"next": target} | ({"reason": exc.reason} if exc.reason else {})
        response = RedirectResponse(f"/login?{urlencode(query)}", status_code=303)
        if exc.reason:
            response.delete_cookie(COOKIE, path="/")
        return response

    @app.exception_handler(grpc.RpcError)
    async def _rpc_error(request: Request, exc: grpc.RpcError):
        code = exc.code()
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return await _login_required(request, LoginRequired("expired"))
        status = {grpc.StatusCode.NOT_FOUND: 404, grpc.StatusCode.PERMISSION_DENIED: 403,
                  grpc.StatusCode.INVALID_ARGUMENT: 400, grpc.StatusCode.UNAVAILABLE: 503,
                  grpc.StatusCode.DEADLINE_EXCEEDED: 504}.get(code, 500)
        title = {404: "Not found", 403: "Not allowed", 503: "Service down",
                 504: "Service did not answer"}.get(status, "The service refused the request")
        return page(request, "error.html", status, title=title, code=code.name, detail=exc.details(),
                    violations=field_violations(exc))

    @app.exception_handler(PaperworksError)
    async def _platform_error(request: Request, exc: PaperworksError):
        status = 400 if isinstance(exc, InvalidArgument) else 404
        return page(request, "error.html", status, title="Not found" if status == 404 else "Bad request",
                    code=exc.code, detail=str(exc), violations=[])

    @app.get("/healthz")
    async def healthz():
        """Liveness of the console process itself (no token, no service called)."""
        return Response("ok", media_type="text/plain")

    # --- log-in ------------------------------------------------------------------------------

    @app.get("/login", response_class=HTMLResponse)
    async def login_form(request: Request, next: str = "/", reason: str = ""):
        message = ("Your token was refused (wrong or expired): paste a valid one."
                   if reason == "expired" else "")
        return page(request, "login.html", next=_safe_next(next), error=message)

    @app.post("/login")
    async def login(request: Request):
        form = await request.form()
        token = str(form.get("token", "")).strip()
        target = _safe_next(str(form.get("next", "/")))
        if not token:
            return page(request, "login.html", 400, next=target, error="Paste your API token.")
        error = await _check_token(AsyncClient(endpoints=endpoints, token=token, settings=config))
        if error:
            return page(request, "login.html", 401, next=target, error=error)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, signer.dumps({"token": token}), max_age=SESSION_MAX_AGE_S,
                            httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https")
        return response

    async def _check_token(probe: AsyncClient) -> str:
        """"" when a service accepts the token; else why not."""
        down = []
        try:
            for service in sorted(endpoints):
                try:
                    await probe.jobs(service).ListJobs(jobs_pb2.ListJobsRequest(page_size=1),
                                                       metadata=probe.metadata, timeout=5)
                    return ""
                except grpc.RpcError as exc:
                    if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                        return "This token was refused: check it and paste it again."
                    down.append(service)
        finally:
            await probe.close()
        return f"No service answered to check the token (down: {', '.join(down) or 'none configured'})."

    @app.post("/logout")
    async def logout():
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    # --- services ----------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    async def home(request: Request):
        c = client(request)

        async def one(service: str) -> dict:
            try:
                d = await c.jobs(service).DescribeService(jobs_pb2.DescribeServiceRequest(),
                                                          metadata=c.metadata, timeout=5)
                return {"name": service, "up": True, "description": d.description,
                        "kinds": [k.name for k in d.kinds], "address": endpoints[service]}
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                    raise
                return {"name": service, "up": False, "error": f"{exc.code().name}: {exc.details()}",
                        "kinds": [], "address": endpoints[service]}

        rows = await asyncio.gather(*(one(s) for s in sorted(endpoints)))
        return page(request, "services.html", rows=rows)

    async def describe(c: AsyncClient, service: str) -> jobs_pb2.DescribeServiceResponse:
        try:
            return await c.jobs(service).DescribeService(jobs_pb2.DescribeServiceRequest(),
                                                         metadata=c.metadata, timeout=5)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ServiceDown(service, exc) from None
            raise

    @app.exception_handler(ServiceDown)
    async def _down(request: Request, exc: ServiceDown):
        return page(request, "error.html", 503, title=f"Service {exc.service} is down",
                    code=exc.error.code().name, detail=exc.error.details(), violations=[],
                    down=exc.service)

    # --- job lists ---------------------------------------------------------------------------

    @app.get("/services/{service}/jobs", response_class=HTMLResponse)
    async def job_list(request: Request, service: str, state: str = "", kind: str = "",
                       since: str = "", page_size: int = 25, page_token: str = ""):
        c = client(request)
        known(service)
        states = [s for s in state.split(",") if s]
        bad = [s for s in states if s.upper() not in STATE_TO_PROTO]
        if bad:
            raise InvalidArgument("state", f"unknown state {bad[0]!r} (known: {', '.join(STATE_TO_PROTO)})")
        if since and since not in SINCE:
            raise InvalidArgument("since", f"one of {', '.join(SINCE)}")
        if page_size not in PAGE_SIZES:
            raise InvalidArgument("page_size", f"one of {', '.join(map(str, PAGE_SIZES))}")
        d = await describe(c, service)
        cutoff = datetime.now(UTC) - SINCE[since] if since else None
        jobs, token = [], page_token
        # newest first: a time filter stops paging at the first job older than its cutoff
        while True:
            try:
                found, token = await c.list(service, kind=kind, states=states, page_size=page_size,
                                            page_token=token)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE:
                    raise ServiceDown(service, exc) from None
                raise
            for j in found:
                if cutoff and j.create_time.ToDatetime(tzinfo=UTC) < cutoff:
                    token = ""
                    break
                jobs.append(j)
            if not token or len(jobs) >= page_size or not cutoff:
                break
        filters = {"state": state, "kind": kind, "since": since, "page_size": page_size}
        next_url = (f"/services/{service}/jobs?{urlencode({**filters, 'page_token': token})}"
                    if token else "")
        first_url = f"/services/{service}/jobs?{urlencode(filters)}" if page_token else ""
        return page(request, "jobs.html", service=service, jobs=[job_view(j) for j in jobs],
                    kinds=[k.name for k in d.kinds], filters=filters, states=states,
                    since_options=list(SINCE), page_sizes=PAGE_SIZES, next_url=next_url,
                    first_url=first_url)

    # --- submitting ----------------------------------------------------------------------------

    async def kind_form(c: AsyncClient, service: str, kind: str):
        d = await describe(c, service)
        info = next((k for k in d.kinds if k.name == kind), None)
        if info is None:
            raise InvalidArgument("kind", f"service {service!r} has no job kind {kind!r} "
                                  f"(known: {', '.join(k.name for k in d.kinds)})")
        return info, forms.fields_of(json.loads(info.params_schema_json))

    @app.get("/services/{service}/submit/{kind}", response_class=HTMLResponse)
    async def submit_form(request: Request, service: str, kind: str):
        info, fields = await kind_form(client(request), known(service), kind)
        return page(request, "submit.html", service=service, info=info, fields=fields,
                    values={f.name: f.initial for f in fields}, errors={}, general=[])

    @app.post("/services/{service}/submit/{kind}")
    async def submit(request: Request, service: str, kind: str):
        c = client(request)
        info, fields = await kind_form(c, known(service), kind)
        params, errors, values = forms.parse(fields, await request.form())
        general = []
        if not errors:
            try:
                job = await c.submit(service, kind, **params)
                return RedirectResponse(f"/jobs/{quote(job.id)}", status_code=303)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise
                errors, general = forms.field_errors(field_violations(exc) or [("", exc.details())],
                                                     [f.name for f in fields])
            except InvalidArgument as exc:  # the SDK's own check (a field the request lacks)
                errors, general = forms.field_errors(exc.violations, [f.name for f in fields])
        return page(request, "submit.html", 400, service=service, info=info, fields=fields,
                    values=values, errors=errors, general=general)

    # --- one job -----------------------------------------------------------------------------

    @app.get("/jobs/{job_id}", response_class=HTMLResponse)
    async def job_page(request: Request, job_id: str):
        c = client(request)
        known(service_of(job_id))
        job = job_view(await c.get(job_id))
        for a in job["artifacts"]:
            if a["summarisable"] and a["size"] <= summaries.SUMMARY_MAX_BYTES:
                data = await _artifact_bytes(c, job_id, a["sha256"])
                a["summary"] = await asyncio.to_thread(summaries.summarise, a["name"], data)
        return page(request, "job.html", job=job, result=_table(job["result"]),
                    params=_table(job["params"]))

    @app.get("/jobs/{job_id}/events")
    async def job_events(request: Request, job_id: str):
        """Server-sent events fed by WatchJob: one `job` event per JobEvent (its seq as the id,
        so a reconnecting browser resumes after it), then `end` once the job is over."""
        c = client(request)
        known(service_of(job_id))
        try:
            after = int(request.headers.get("last-event-id", "0") or 0)
        except ValueError:
            after = 0
        await c.get(job_id)  # a wrong token or someone else's job fails here, as a page status

        async def stream():
            yield "retry: 2000\n\n"
            try:
                async for event in c.watch(job_id, after_seq=max(after, 0)):
                    yield f"id: {event.seq}\nevent: job\ndata: {json.dumps(event_view(event))}\n\n"
                yield "event: end\ndata: {}\n\n"
            except grpc.RpcError as exc:
                detail = {"code": exc.code().name, "message": exc.details()}
                yield f"event: failure\ndata: {json.dumps(detail)}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    @app.post("/jobs/{job_id}/cancel")
    async def cancel(request: Request, job_id: str):
        c = client(request)
        known(service_of(job_id))
        await c.cancel(job_id)
        return RedirectResponse(f"/jobs/{quote(job_id)}", status_code=303)

    async def _artifact_bytes(c: AsyncClient, job_id: str, sha256: str) -> bytes:
        stream = c.jobs(service_of(job_id)).GetArtifact(
            jobs_pb2.GetArtifactRequest(job_id=job_id, sha256=sha256), metadata=c.metadata, timeout=120)
        return b"".join([r.data async for r in stream])

    @app.get("/jobs/{job_id}/artifacts/{sha256}")
    async def artifact(request: Request, job_id: str, sha256: str, download: int = 0):
        """The artifact's bytes streamed from GetArtifact: inline for pictures, else a download."""
        c = client(request)
        known(service_of(job_id))
        stream = c.jobs(service_of(job_id)).GetArtifact(
            jobs_pb2.GetArtifactRequest(job_id=job_id, sha256=sha256), metadata=c.metadata, timeout=600)
        first = await stream.read()  # the status (NOT_FOUND, UNAUTHENTICATED) arrives before any byte
        if first is grpc.aio.EOF:
            return Response(b"", media_type="application/octet-stream")
        name = Path(first.artifact.name).name
        # only pictures keep a type (never SVG or HTML): anything else is an opaque download, so an
        # artifact can never run as a page of the console's origin
        media = summaries.image_type(name, first.artifact.media_type)
        picture = media is not None and not download
        media = media or "application/octet-stream"

        async def body():
            yield first.data
            while (reply := await stream.read()) is not grpc.aio.EOF:
                yield reply.data

        disposition = "inline" if picture else "attachment"
        return StreamingResponse(body(), media_type=media, headers={
            "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(name)}",
            "Cache-Control": "private, max-age=3600",
        })

    return app


def _safe_next(target: str) -> str:
    """Only a path on this site (no `//host` or scheme): log-in never redirects elsewhere."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


def serve(host: str = "127.0.0.1", port: int = 8080, secret: str | None = None) -> None:
    """Runs the console with uvicorn until interrupted (the stack's console process)."""
    import uvicorn

    uvicorn.run(create_app(secret=secret), host=host, port=port, log_level="warning",
                proxy_headers=True)
