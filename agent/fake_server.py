"""A scriptable fake OpenAI-compatible chat server on 127.0.0.1, for tests and offline demos.

It lets the real client path (litellm -> HTTP) be tested without any provider: script the
replies (`429` then `200`, a slow reply, a `401`...), point litellm at `server.api_base`, and
read back what the server saw (request count, bodies, the most requests in flight at once).
It binds loopback only, reads bounded request bodies and serves from a daemon thread.

    with FakeOpenAIServer([Reply.http_error(429), Reply.ok("hi")]) as server:
        make_client("openai/fake-model", llm_args={"api_base": server.api_base, "api_key": "x"})
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY_BYTES = 4 << 20

_ERRORS = {  # status -> (type, code, message) in the shape OpenAI sends
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    404: ("invalid_request_error", "model_not_found", "The model `{model}` does not exist."),
    429: ("rate_limit_exceeded", "rate_limit_exceeded", "Rate limit reached; try again."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The server is overloaded."),
}
CONTEXT_MESSAGE = ("This model's maximum context length is 8192 tokens. However, your messages "
                   "resulted in 9000 tokens. Please reduce the length of the messages.")


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request."""

    status: int = 200
    content: str = "ok"
    delay_s: float = 0.0
    error: dict[str, Any] | None = None
    """The `error` object of a non-200 body; a default for the status when None."""
    headers: dict[str, str] = field(default_factory=dict)
    usage: bool = True
    """Report token usage (word counts); some local servers send none."""

    @classmethod
    def ok(cls, content: str = "ok", delay_s: float = 0.0) -> Reply:
        return cls(200, content, delay_s)

    @classmethod
    def http_error(cls, status: int, message: str | None = None, code: str | None = None,
                    **kw: Any) -> Reply:
        kind, default_code, default_message = _ERRORS.get(status, ("api_error", None, "Error."))
        return cls(status, error={"message": message or default_message, "type": kind,
                                  "param": None, "code": code or default_code}, **kw)

    @classmethod
    def context_exceeded(cls) -> Reply:
        return cls.http_error(400, CONTEXT_MESSAGE, "context_length_exceeded")


class FakeOpenAIServer:
    """Serves `POST /v1/chat/completions` (and `/chat/completions`) from a script of replies.

    Replies are used in order, one per request; once the script is spent, `default` answers.
    """

    def __init__(self, script: list[Reply] | None = None, default: Reply | None = None):
        self.script = list(script or [])
        self.default = default or Reply.ok()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True, name="fake-openai-server")

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping out a slow reply
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self):  # returns the started server itself
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.script.pop(0) if self.script else self.default

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _completion_body(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    completion = len(reply.content.split())
    payload = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
               "model": body.get("model", "fake-model"),
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": reply.content}}]}
    if reply.usage:
        payload["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                            "total_tokens": prompt + completion}
    return payload


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
            if length > MAX_BODY_BYTES:
                return self._send(413, {"error": {"message": "request too large"}}, {})
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                return self._send(400, {"error": {"message": "body is not JSON"}}, {})
            reply = server._next_reply(body)
            try:
                if reply.delay_s and server._stop.wait(reply.delay_s):
                    return
                if reply.status == 200:
                    payload = _completion_body(reply, body)
                else:
                    error = dict(reply.error or Reply.http_error(reply.status).error or {})
                    error["message"] = str(error.get("message", "")).format(
                        model=body.get("model", ""))
                    payload = {"error": error}
                self._send(reply.status, payload, reply.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer
            finally:
                server._done()

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler
