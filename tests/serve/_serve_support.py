"""A real uvicorn server for the HTTP tests: the app on 127.0.0.1, an OS-chosen port, in a daemon
thread, run with :func:`causaltrace.serve.http.uvicorn_config` (the same protocol class, timeouts
and connection cap as ``causaltrace serve``); and raw-socket helpers for what a client library
would hide (a connection that sends nothing, a head in pieces, a body that never ends)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from causaltrace.serve.http import ServeLimits, uvicorn_config


class BackgroundServer:
    """uvicorn on 127.0.0.1, an OS-chosen port, in a daemon thread; stopped on exit."""

    def __init__(self, app, limits: ServeLimits | None = None) -> None:
        self.app = app
        config = uvicorn_config(app, "127.0.0.1", 0, limits=limits, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = ""
        self.port = 0

    def __enter__(self) -> BackgroundServer:
        self.thread.start()
        deadline = time.monotonic() + 180
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        assert not self.thread.is_alive(), "the test server did not stop"

    def connect(self) -> socket.socket:
        """A raw TCP connection to the server."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


def is_open(sock: socket.socket, wait: float) -> bool:
    """Whether the server keeps ``sock`` open (sends nothing and does not close it) for
    ``wait`` seconds."""
    sock.settimeout(wait)
    try:
        data = sock.recv(65536)
    except TimeoutError:
        return True
    except ConnectionResetError:
        return False
    assert data == b"", f"the server answered instead of closing: {data[:200]!r}"
    return False


def seconds_until_closed(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes ``sock`` (fails past ``limit``); what it sent before
    closing must be nothing."""
    started = time.monotonic()
    sock.settimeout(limit)
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        data = b""
    assert data == b"", f"the server answered instead of closing: {data[:200]!r}"
    return time.monotonic() - started


def read_response(sock: socket.socket, limit: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response read off a raw socket (status, headers, body), up to its
    Content-Length or the connection's end."""
    sock.settimeout(limit)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"the connection closed before a response head: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    length = int(headers.get("content-length", "-1"))
    while length < 0 or len(body) < length:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        body += chunk
    return status, headers, body
