"""What every sandboxed worker shares: the pipe protocol, its resource limits, its serve loop.

The ``python`` tool's REPL (``python_worker.py``) and the ``sql`` tool's DuckDB process
(``sql_worker.py``) run as scripts inside a sandbox where this file is bound beside them and
nothing of ``causaltrace`` is importable; they import it from their own folder. It imports only
the standard library. Protocol: each message is a 4-byte big-endian length followed by that many
bytes of UTF-8 JSON (an object); the host sends one request and waits for its response, which
carries the request's ``id``.

The functions the channel calls are bound here, at import, before any agent code runs: agent
code that replaces ``json.dumps`` or ``os.write`` breaks only its own namespace, not the protocol.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import resource
import signal
import struct
import sys
from collections.abc import Callable

HEADER = struct.Struct(">I")
_dumps, _loads = json.dumps, json.loads
_read, _write, _close, _dup, _dup2 = os.read, os.write, os.close, os.dup, os.dup2

Handler = Callable[[dict], dict]


class Channel:
    """The protocol pipes, moved off fds 0/1 so that nothing the worker's code (or a library)
    prints can corrupt them; fds made by ``os.dup`` are not inherited by subprocesses."""

    def __init__(self, max_request: int) -> None:
        self.max_request = max_request
        self.rfd = _dup(0)
        self.wfd = _dup(1)
        devnull = os.open(os.devnull, os.O_RDWR)
        _dup2(devnull, 0)
        _dup2(devnull, 1)
        _close(devnull)

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = _read(self.rfd, n)
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> dict:
        (size,) = HEADER.unpack(self._read_exact(HEADER.size))
        if size > self.max_request:
            raise EOFError
        message = _loads(self._read_exact(size))
        if not isinstance(message, dict):
            raise ValueError("a request is not an object")
        return message

    def send(self, message: dict) -> None:
        data = _dumps(message).encode()
        view = memoryview(HEADER.pack(len(data)) + data)
        while view:
            view = view[_write(self.wfd, view) :]

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                _close(fd)


def _cap(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def apply_limits(limits: dict, sandboxed: bool) -> None:
    """Hard resource limits of this process (lowered only: there is no way back up).

    ``limits`` has ``data_bytes``, ``cpu_seconds``, ``file_bytes``, ``open_files`` and
    ``processes``. RLIMIT_DATA (private writable memory: heap, anonymous mappings, thread stacks)
    is the memory limit proper, and also bounds what DuckDB's list functions allocate outside its
    own ``memory_limit``: allocations past it fail (MemoryError, or DuckDB's out-of-memory
    error). RLIMIT_AS is only a backstop, looser by 4 GiB, because DuckDB's allocator reserves
    address space it never uses. Shared memory these limits would not count (memfd, System V
    segments) cannot be created in a sandbox at all (its seccomp filter, see sandbox.py).
    """
    _cap(resource.RLIMIT_DATA, limits["data_bytes"])
    _cap(resource.RLIMIT_AS, limits["data_bytes"] + 4 * 1024**3)
    _cap(resource.RLIMIT_CPU, limits["cpu_seconds"])
    _cap(resource.RLIMIT_FSIZE, limits["file_bytes"])
    _cap(resource.RLIMIT_NOFILE, limits["open_files"])
    _cap(resource.RLIMIT_CORE, 0)
    if sandboxed:
        # Counted per user namespace (or per sandbox uid), so one episode's fork bomb cannot
        # starve another's. Outside a sandbox it would count all the user's processes.
        _cap(resource.RLIMIT_NPROC, limits["processes"])
    # Writing past RLIMIT_FSIZE then fails with EFBIG instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # Under memory pressure the kernel should kill a worker before anything of the host.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")


def greeting(**extra: object) -> dict:
    """The ``ready`` message: what the host checks before it lets a worker serve an episode
    (the interpreter must be the host's; the generator must not be importable)."""
    generator = [
        n for n in ("causaltrace", "causaltrace_domains", "domains") if importlib.util.find_spec(n)
    ]
    return {
        "op": "ready",
        "python": sys.version.split()[0],
        "prefix": sys.prefix,
        "pid": os.getpid(),
        "generator_importable": generator,
        **extra,
    }


def serve(channel: Channel, ready: Callable[[], dict], handlers: dict[str, Handler]) -> None:
    """Greet the host (the worker is warm), then answer requests until the host goes away.

    A handler's exception becomes an error response; the worker keeps serving.
    """
    try:
        channel.send(ready())
    except Exception as exc:  # an import failed: tell the host, which reports it
        channel.send({"op": "ready", "error": f"{type(exc).__name__}: {exc}"})
        return
    handlers = {**handlers, "ping": lambda request: {"ok": True}}
    while True:
        try:
            request = channel.receive()
        except (EOFError, OSError, ValueError):
            return
        handler = handlers.get(request.get("op"))
        if handler is None:
            response = {"ok": False, "error": f"unknown op {request.get('op')!r}"}
        else:
            try:
                response = handler(request)
            except Exception as exc:
                response = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        response["id"] = request.get("id")
        # Which process answered (its PID in the sandbox): the host keeps it and kills every
        # other process below the sandbox's init after a call (pool.SandboxProcess.reap_strays).
        response["pid"] = os.getpid()
        try:
            channel.send(response)
        except (OSError, ValueError):
            return
