"""A local OpenAI-compatible server (chat and legacy completions) with scripted answers, for the
router's tests.

The router's remote agents are reached through the shared `openai` backend; tests run that real
client over a real socket against this server. Answers come from `answer(prompt)` (e.g. a solver
that is right on some task families and wrong on others); `fail_next` scripts HTTP errors and
`delay_s` makes the server slow, so timeouts and error surfacing are exercised end to end. A scripted
failure may carry a Retry-After header (seconds), as rate-limited hosted APIs send with 429. Every
request's route and payload are recorded (`routes`, `payloads`). Answers may run over several lines;
a request's `stop` sequences and `max_tokens` (counted in characters here) are honoured, with the
finish reason and usage a real server reports.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def solve_checkable(prompt: str) -> str:
    """A remote that is right on the router's arithmetic and string tasks and wrong on lookups."""
    if prompt.startswith("up:"):
        return prompt[3:-1].upper()
    if prompt.startswith("get:"):
        return "???"
    a, b = prompt.rstrip("=").split("+")
    return str(int(a) + int(b))


class ScriptedOpenAI:
    def __init__(self, answer: Callable[[str], str], model: str = "remote-model") -> None:
        self.answer = answer
        self.model = model
        self.delay_s = 0.0
        self.prompts: list[str] = []
        self.routes: list[str] = []  # the route of each answered request
        self.payloads: list[dict] = []
        self._failures: deque[tuple[int, str, float | None]] = deque()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def fail_next(self, status: int, message: str, times: int = 1, retry_after: float | None = None) -> None:
        with self._lock:
            self._failures.extend([(status, message, retry_after)] * times)

    def start(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def reply(self, path: str, payload: dict) -> tuple[int, dict, dict]:
        """(status, body, extra headers) for one request."""
        chat = path == "/v1/chat/completions"
        prompt = payload["messages"][-1]["content"] if chat else payload.get("prompt", "")
        with self._lock:
            failure = self._failures.popleft() if self._failures else None
            if path in ("/v1/completions", "/v1/chat/completions"):
                self.prompts.append(prompt)
                self.routes.append(path)
                self.payloads.append(payload)
        if failure is not None:
            status, message, retry_after = failure
            headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
            return status, {"error": {"message": message, "type": "scripted"}}, headers
        if path not in ("/v1/completions", "/v1/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}, {}
        if payload.get("model") != self.model:
            return 404, {"error": {"message": f"The model `{payload.get('model')}` does not exist."}}, {}
        text, finish = self.answer(prompt), "stop"
        for stop in payload.get("stop") or []:
            text = text.split(stop, 1)[0]
        if len(text) > payload.get("max_tokens", 16):
            text, finish = text[: payload.get("max_tokens", 16)], "length"
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(text),
                 "total_tokens": len(prompt) + len(text)}
        if chat:
            return 200, {"object": "chat.completion", "model": self.model, "usage": usage,
                         "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                                      "message": {"role": "assistant", "content": text}}]}, {}
        return 200, {
            "object": "text_completion",
            "model": self.model,
            "usage": usage,
            "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
        }, {}


def _handler(server: ScriptedOpenAI):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            length = int(self.headers.get("content-length") or 0)
            payload = json.loads(self.rfile.read(length) or b"{}")
            if server.delay_s:
                threading.Event().wait(server.delay_s)
            status, body, headers = server.reply(self.path, payload)
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and left

        def log_message(self, *args):
            pass

    return Handler
