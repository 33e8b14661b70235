"""A tiny OpenAI-compatible chat server for tests: ``POST /v1/chat/completions`` answered by a
Python function, in a thread, on ``127.0.0.1:<free port>``.

    def handler(request: dict) -> dict | tuple[int, dict]:
        return completion(calls=[call("sql", {"query": "SELECT 1"})])

    with StubServer(handler) as server:
        agent = make_agent("openai", {"model": "stub", "base_url": server.base_url})
        ...
    server.requests   # every request body received, in order
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[[dict[str, Any]], Any]


def call(
    name: str, arguments: Any, call_id: str | None = "auto", raw: bool = False
) -> dict[str, Any]:
    """One tool call as a server sends it: ``arguments`` as JSON text (a string is sent as it
    is), or with ``raw=True`` as a JSON object; ``call_id=None`` leaves the id out."""
    if not raw and not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id == "auto":
        out["id"] = f"srv_{name}_{zlib.crc32(json.dumps(arguments, sort_keys=True).encode())}"
    elif call_id is not None:
        out["id"] = call_id
    return out


def completion(
    content: str | None = None, calls: list[dict[str, Any]] | None = None, **message_fields: Any
) -> dict[str, Any]:
    """A chat-completions body with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content, **message_fields}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def episode_of(request: dict[str, Any], prompts: dict[str, str]) -> str:
    """Which episode a request belongs to (its user message is the episode's prompt)."""
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return prompts[user]


def turn_of(request: dict[str, Any]) -> int:
    """0 for the first request of an episode, then 1, 2, ... (assistant messages so far)."""
    return sum(m["role"] == "assistant" for m in request["messages"])


class StubServer:
    """Serves ``handler`` in a background thread; ``base_url`` ends in ``/v1``."""

    def __init__(self, handler: Handler):
        self.handler = handler
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        stub = self

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                request = json.loads(body)
                with stub.lock:
                    stub.requests.append(request)
                try:
                    out = stub.handler(request)
                except Exception as exc:  # a bug in a test handler: show it as a 500
                    out = (500, {"error": {"message": f"handler failed: {exc!r}"}})
                status, payload = out if isinstance(out, tuple) else (200, out)
                self._send(status, payload)

            def _send(self, status: int, payload: Any) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), RequestHandler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
