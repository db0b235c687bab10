"""A real OpenAI-compatible HTTP server for tests, stdlib only, scriptable per request.

The client is tested over real sockets (timeouts, dropped connections, Retry-After) rather than a
mock transport, because those failures live in the transport. Unscripted requests get
deterministic answers computed from the request: completions continue with the prompt's last
characters, one character per "token", and a character's logprob is `char_logprob(c)`, so tests
can predict scores exactly.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def char_logprob(char: str) -> float:
    return -((ord(char) % 7) + 1) / 10


@dataclass
class Reply:
    """A scripted answer: a JSON `body` (str/bytes sent raw), or `drop` to close the socket."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    json: Any


class FakeOpenAIServer:
    char_logprob = staticmethod(char_logprob)

    def __init__(self, model: str = "fake-model", api_key: str | None = None) -> None:
        self.model = model
        self.api_key = api_key
        self.requests: list[Recorded] = []
        self._scripts: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def script(self, path: str, *replies: dict[str, Any]) -> None:
        """Serve `replies` (each `Reply` fields) in order to the next requests for `path`."""
        with self._lock:
            self._scripts.setdefault(path, deque()).extend(Reply(**r) for r in replies)

    def calls(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, path: str) -> Reply | None:
        with self._lock:
            queue = self._scripts.get(path)
            return queue.popleft() if queue else None

    def _answer(self, method: str, path: str, headers: dict[str, str], payload: Any) -> Reply:
        if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "invalid api key")
        if method == "GET" and path == "/v1/models":
            return Reply(body={"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            return _error(404, f"no route {method} {path}")
        if payload.get("model") != self.model:
            return _error(404, f"The model `{payload.get('model')}` does not exist.")
        if path == "/v1/completions":
            return Reply(body=_completion(payload))
        return Reply(body=_chat(payload))


def _error(status: int, message: str) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "invalid_request"}})


def _continue(prompt: str, max_tokens: int, stop: list[str]) -> tuple[str, str]:
    text = ((prompt[-3:] or "x") * max_tokens)[:max_tokens]
    for s in stop:
        if s in text:
            return text.split(s, 1)[0], "stop"
    return text, "length"


def _completion(payload: dict[str, Any]) -> dict[str, Any]:
    prompt = payload["prompt"]
    text, finish = _continue(prompt, payload.get("max_tokens", 16), payload.get("stop") or [])
    choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish}
    if payload.get("logprobs") is not None:
        chars = list(prompt + text) if payload.get("echo") else list(text)
        start = 0 if payload.get("echo") else len(prompt)
        values: list[float | None] = [char_logprob(c) for c in chars]
        if payload.get("echo") and values:
            values[0] = None
        choice["logprobs"] = {
            "tokens": chars,
            "token_logprobs": values,
            "text_offset": [start + i for i in range(len(chars))],
            "top_logprobs": None,
        }
        if payload.get("echo"):
            choice["text"] = prompt + text
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "model": payload["model"],
        "choices": [choice],
        "usage": _usage(prompt, text),
    }


def _usage(prompt: str, completion: str) -> dict[str, int]:
    return {"prompt_tokens": len(prompt), "completion_tokens": len(completion),
            "total_tokens": len(prompt) + len(completion)}


def _chat(payload: dict[str, Any]) -> dict[str, Any]:
    last = payload["messages"][-1]["content"]
    if payload.get("response_format", {}).get("type") == "json_object":
        content = json.dumps({"echo": last})
    else:
        content = "echo: " + last
    finish = "stop"
    for s in payload.get("stop") or []:
        if s in content:
            content = content.split(s, 1)[0]
    if len(content) > payload.get("max_tokens", 1 << 30):
        content, finish = content[: payload["max_tokens"]], "length"
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": finish,
    }
    if payload.get("logprobs"):
        choice["logprobs"] = {
            "content": [{"token": c, "logprob": char_logprob(c), "top_logprobs": []} for c in content]
        }
    return {
        "id": "chat-1",
        "object": "chat.completion",
        "model": payload["model"],
        "choices": [choice],
        "usage": _usage(" ".join(m["content"] for m in payload["messages"]), content),
    }


def _handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            payload = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = self.path.split("?", 1)[0]
            server.requests.append(Recorded(method, path, headers, payload))
            reply = server._next(path) or server._answer(method, path, headers, payload or {})
            if reply.delay_s and server._stopped.wait(reply.delay_s):
                return
            if reply.drop:
                self.close_connection = True
                self.connection.close()
                return
            body = reply.body
            data = body if isinstance(body, bytes) else str(body).encode()
            if not isinstance(body, str | bytes):
                data = json.dumps(body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    return Handler
