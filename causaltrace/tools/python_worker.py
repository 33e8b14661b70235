"""The in-sandbox REPL of the ``python`` tool: one process per episode, driven over pipes.

This file is bound *alone* into the sandbox and run as a script (``python -I -S``): it imports
only the standard library and the allowed data packages, never ``causaltrace``, which is not
importable inside the sandbox. Protocol: each message is a 4-byte big-endian length followed by
that many bytes of UTF-8 JSON. The host sends one request and waits for its response.

Lifecycle: start, apply resource limits, import the data packages, answer ``{"op": "ready"}``
(the worker is now *warm*), then receive exactly one ``load`` (the episode's files are in the
data directory), then any number of ``exec``. A second ``load`` is refused: a worker serves one
episode and is then discarded.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import importlib.util
import json
import linecache
import os
import resource
import signal
import struct
import sys
import time
import traceback

_HEADER = struct.Struct(">I")
_MAX_REQUEST = 64 * 1024 * 1024
_MAIN_PID = os.getpid()


class _Channel:
    """The protocol pipes, moved off fds 0/1 so that agent output cannot corrupt them."""

    def __init__(self) -> None:
        self.rfd = os.dup(0)  # os.dup makes non-inheritable fds: subprocesses do not get them
        self.wfd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = os.read(self.rfd, n)
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> dict:
        (size,) = _HEADER.unpack(self._read_exact(_HEADER.size))
        if size > _MAX_REQUEST:
            raise EOFError
        return json.loads(self._read_exact(size))

    def send(self, message: dict) -> None:
        data = json.dumps(message).encode()
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(self.wfd, view) :]

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)


class _CappedText:
    """A text stream that keeps the first ``cap`` characters and counts the rest."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.kept = 0
        self.total = 0

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.total += len(text)
        room = self.cap - self.kept
        if room > 0:
            piece = text[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("the python tool's output stream has no file descriptor")

    def getvalue(self) -> str:
        return "".join(self.parts)


def _apply_limits(limits: dict, sandboxed: bool) -> None:
    def cap(kind: int, value: int) -> None:
        _, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))

    # RLIMIT_DATA (private writable memory: heap, anonymous mappings, thread stacks) is the
    # memory limit proper: allocations past it fail with MemoryError. RLIMIT_AS is only a
    # backstop, looser by 4 GiB, because DuckDB's allocator reserves address space it never uses.
    cap(resource.RLIMIT_DATA, limits["memory_bytes"])
    cap(resource.RLIMIT_AS, limits["memory_bytes"] + 4 * 1024**3)
    cap(resource.RLIMIT_CPU, limits["cpu_seconds"])
    cap(resource.RLIMIT_FSIZE, limits["max_file_bytes"])
    cap(resource.RLIMIT_NOFILE, limits["max_open_files"])
    cap(resource.RLIMIT_CORE, 0)
    if sandboxed:
        # Counted per user namespace (or per sandbox uid), so one episode's fork bomb cannot
        # starve another's. Outside a sandbox it would count all the user's processes.
        cap(resource.RLIMIT_NPROC, limits["max_processes"])
    # Writing past RLIMIT_FSIZE then fails with EFBIG instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:  # under memory pressure the kernel should kill agent code before anything else
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def _trim_heap() -> None:
    """Return free heap memory to the system (glibc keeps it otherwise)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)


class Worker:
    """The REPL state of one episode."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.max_chars = int(config["max_output_chars"])
        self.data_dir = config["data_dir"]
        self.sandboxed = bool(config["sandboxed"])
        self.namespace: dict | None = None
        self.cell = 0
        self.fd_capture = None

    # -- requests --------------------------------------------------------------------------
    def ready(self) -> dict:
        for name in self.config["preload"]:
            importlib.import_module(name)
        if "pandas" in sys.modules:  # run the Parquet and display code paths once, while warm
            import io

            import pandas as pd

            buffer = io.BytesIO()
            pd.DataFrame({"a": [1.0], "b": ["x"]}).to_parquet(buffer)
            buffer.seek(0)
            repr(pd.read_parquet(buffer))
        generator = [n for n in ("causaltrace", "domains") if importlib.util.find_spec(n)]
        return {
            "op": "ready",
            "python": sys.version.split()[0],
            "prefix": sys.prefix,
            "pid": os.getpid(),
            "generator_importable": generator,
        }

    def load(self, request: dict) -> dict:
        if self.namespace is not None:
            return {"ok": False, "error": "this worker already serves an episode"}
        import pandas as pd

        pd.set_option("display.max_rows", 60)
        pd.set_option("display.max_columns", 30)
        pd.set_option("display.width", 160)
        tables = {}
        for name in sorted(os.listdir(self.data_dir)):
            if name.endswith(".parquet"):
                tables[name[: -len(".parquet")]] = pd.read_parquet(
                    os.path.join(self.data_dir, name)
                )
        dictionary = None
        path = os.path.join(self.data_dir, "data_dictionary.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                dictionary = json.load(handle)
        namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
        for module, alias in (
            ("numpy", "np"),
            ("pandas", "pd"),
            ("duckdb", "duckdb"),
            ("scipy", "scipy"),
        ):
            with contextlib.suppress(ImportError):
                namespace[alias] = importlib.import_module(module)
        namespace["tables"] = tables
        namespace["data_dictionary"] = dictionary
        namespace.update(tables)
        self.namespace = namespace
        os.chdir(self.data_dir)
        shapes = {name: list(df.shape) for name, df in tables.items()}
        _trim_heap()
        return {"ok": True, "tables": shapes}

    def execute(self, request: dict) -> dict:
        if self.namespace is None:
            return {"ok": False, "error": "no episode loaded"}
        self.cell += 1
        out = _CappedText(self.max_chars)
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out
        fd_text, fd_size = "", 0
        capture = self._fd_capture_start()
        started = time.monotonic()
        result = error = None
        try:
            result = self._run_cell(request["code"], out)
        except BaseException as exc:  # the agent's exception, reported as text
            error = self._format_error(exc)
        finally:
            if os.getpid() != _MAIN_PID:  # a fork of agent code got back here: never answer
                os._exit(0)
            sys.stdout, sys.stderr = saved
            fd_text, fd_size = self._fd_capture_end(capture)
            self._reap()
            if time.monotonic() - started > 0.02:  # real work: give freed memory back
                _trim_heap()
        reply = {"ok": True, "stdout": out.getvalue(), "stdout_total": out.total}
        # Each piece is cut to the cap here (the host joins them and says what was cut).
        for key, text in (("fd_output", fd_text), ("result", result), ("error", error)):
            if text:
                reply[key] = text[: self.max_chars]
                reply[key + "_total"] = len(text)
        if fd_text:
            reply["fd_output_total"] = max(len(fd_text), fd_size)
        return reply

    # -- helpers ---------------------------------------------------------------------------
    def _run_cell(self, code: str, out: _CappedText) -> str | None:
        filename = f"<cell-{self.cell}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), self.namespace)
        if last is None:
            return None
        value = eval(compile(last, filename, "eval"), self.namespace)
        if value is None:
            return None
        self.namespace["_"] = value
        return repr(value)

    @staticmethod
    def _format_error(exc: BaseException) -> str:
        if isinstance(exc, SystemExit):
            return f"SystemExit({exc.code!r}) ignored: the Python namespace keeps running."
        if isinstance(exc, SyntaxError) and (exc.filename or "").startswith("<cell-"):
            return "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
        tb = exc.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
            tb = tb.tb_next
        return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()

    def _fd_capture_start(self):
        """Point fds 1 and 2 at a fresh memfd, for output written below Python (C, children)."""
        try:
            if self.fd_capture is None:
                self.fd_capture = os.memfd_create("python-tool-output", 0)
            os.ftruncate(self.fd_capture, 0)
            os.lseek(self.fd_capture, 0, os.SEEK_SET)
            os.dup2(self.fd_capture, 1)
            os.dup2(self.fd_capture, 2)
            return self.fd_capture
        except (OSError, AttributeError):
            return None

    def _fd_capture_end(self, fd) -> tuple[str, int]:
        """Output written to fds 1 and 2 during the call (its start) and its size in bytes."""
        if fd is None:
            return "", 0
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.close(devnull)
            size = os.fstat(fd).st_size
            data = os.pread(fd, min(size, self.max_chars * 4), 0)
            os.ftruncate(fd, 0)
            return data.decode("utf-8", errors="replace"), size
        except OSError:
            return "", 0

    def _reap(self) -> None:
        """Kill every other process of the sandbox: nothing agent code starts outlives a call.

        Only inside a sandbox, where this process has its own PID namespace (kill(-1) then
        reaches only the sandbox); never in unsandboxed mode.
        """
        if not self.sandboxed:
            return
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            return  # nothing else runs in the sandbox
        # Collect the killed children (and, where this process is PID 1, the orphans too) so that
        # they stop counting against RLIMIT_NPROC. Killed processes exit promptly; do not wait
        # for long on one stuck in the kernel.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.005)


def main() -> None:
    config = json.loads(sys.argv[1])
    for path in config["site"]:
        sys.path.append(path)
    _apply_limits(config["limits"], bool(config["sandboxed"]))
    channel = _Channel()
    os.register_at_fork(after_in_child=channel.close)
    worker = Worker(config)
    try:
        channel.send(worker.ready())
    except Exception as exc:  # an import failed: tell the host, which reports it
        channel.send({"op": "ready", "error": f"{type(exc).__name__}: {exc}"})
        return
    handlers = {"load": worker.load, "exec": worker.execute, "ping": lambda r: {"ok": True}}
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
        try:
            channel.send(response)
        except (OSError, ValueError):
            return


if __name__ == "__main__":
    main()
