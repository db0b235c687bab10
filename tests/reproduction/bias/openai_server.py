"""A local OpenAI-compatible server for the bias service's tests and benchmark (stdlib only).

It serves in-process models (the planted target, the lexicon judge, ...) under model names over
real HTTP, so the service's `openai` backend runs its real client code: JSON bodies, status
codes, Retry-After, timeouts. Faults are scripted two ways: `script(model, *faults)` queues
faults for that model's next requests, and `rule(fn)` decides per request from its payload
(e.g. "every judge request about question X gets garbage"). A fault is a dict with any of:
status (+ retry_after), delay_s (answer late), content (answer this text instead),
truncate_before (cut the real answer where this text starts).
"""

from __future__ import annotations

import json
import threading
from collections import Counter, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from paperworks.shared.backends import ChatMessage, ModelBackend

Fault = dict[str, Any]


class LocalOpenAIServer:
    def __init__(self, models: dict[str, ModelBackend], *, latency_s: float = 0.0) -> None:
        self.models = models
        self.latency_s = latency_s  # added to every answer, as a remote model's generation time
        self.served: Counter[tuple[str, int]] = Counter()  # (model, status) → responses
        self.faults_used: list[tuple[str, Fault]] = []
        self._queues: dict[str, deque[Fault]] = {}
        self._rules: list[Callable[[str, dict], Fault | None]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> LocalOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LocalOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, model: str, *faults: Fault) -> None:
        with self._lock:
            self._queues.setdefault(model, deque()).extend(faults)

    def rule(self, fn: Callable[[str, dict], Fault | None]) -> None:
        self._rules.append(fn)

    def _fault(self, model: str, payload: dict) -> Fault | None:
        with self._lock:
            queue = self._queues.get(model)
            fault = queue.popleft() if queue else None
        for rule in self._rules:
            fault = fault or rule(model, payload)
        if fault:
            with self._lock:
                self.faults_used.append((model, fault))
        return fault

    def respond(self, path: str, payload: dict) -> tuple[int, dict, dict[str, str], float]:
        """(status, body, headers, delay) for one request."""
        name = payload.get("model", "")
        if name not in self.models:
            return 404, {"error": {"message": f"The model `{name}` does not exist."}}, {}, 0.0
        fault = self._fault(name, payload) or {}
        delay = float(fault.get("delay_s", self.latency_s))
        if "status" in fault:
            headers = {"retry-after": str(fault["retry_after"])} if "retry_after" in fault else {}
            return (
                fault["status"],
                {"error": {"message": "scripted failure", "type": "server_error"}},
                headers,
                delay,
            )
        model = self.models[name]
        if path == "/v1/chat/completions":
            messages = [ChatMessage(m["role"], m["content"]) for m in payload["messages"]]
            text = model.chat(
                messages, seed=payload.get("seed"), max_new_tokens=payload.get("max_tokens", 256)
            ).text
        else:
            text = model.generate(
                [payload["prompt"]],
                seed=payload.get("seed"),
                logprobs=False,
                max_new_tokens=payload.get("max_tokens", 64),
            )[0].text
        text = fault.get("content", text)
        if "truncate_before" in fault and fault["truncate_before"] in text:
            text = text[: text.index(fault["truncate_before"])]
        if path == "/v1/chat/completions":
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        else:
            choice = {"index": 0, "text": text, "finish_reason": "stop"}
        return 200, {"id": "x", "object": "completion", "model": name, "choices": [choice]}, {}, delay


def _handler(server: LocalOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(
                    200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]}
                )
            else:
                self._send(404, {"error": {"message": f"no route GET {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            payload = json.loads(self.rfile.read(length) or b"{}")
            if self.path not in ("/v1/chat/completions", "/v1/completions"):
                self._send(404, {"error": {"message": f"no route POST {self.path}"}})
                return
            status, body, headers, delay = server.respond(self.path, payload)
            if delay and server._stopping.wait(delay):
                return
            with server._lock:
                server.served[(payload.get("model", ""), status)] += 1
            self._send(status, body, headers)

        def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout); nothing to tell it

    return Handler
