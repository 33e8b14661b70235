"""The in-sandbox REPL of the ``python`` tool: one process per episode, driven over pipes.

This file is bound *alone* into the sandbox and run as a script (``python -I -S``): it imports
only the standard library and the allowed data packages, never ``causaltrace``, which is not
importable inside the sandbox. Protocol: each message is a 4-byte big-endian length followed by
that many bytes of UTF-8 JSON. The host sends one request and waits for its response.

Lifecycle: start, apply resource limits, import the data packages, answer ``{"op": "ready"}``
(the worker is now *warm*), then receive exactly one ``load`` (the episode's files are in the
data directory), then any number of ``exec``. A second ``load`` is refused: a worker serves one
episode and is then discarded.

Process layout inside a sandbox (where this script starts as PID 1 of the sandbox's PID
namespace): PID 1 stays a small *supervisor* that never runs agent code; it forks the REPL, reaps
orphans and, when the REPL dies, ends the sandbox with the REPL's status (128 + N for a signal).
After every call the REPL kills every other process of the sandbox (``kill(-1)`` spares PID 1
and the caller). If the call left a thread running (agent code or a library started one), the
REPL forks a successor, which has the whole namespace but only the forking thread; the successor
announces itself to the supervisor and kills the old REPL with its threads. Threads and
processes started by agent code therefore never outlive the call that started them.
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
import signal
import struct
import sys
import time
import traceback

if __package__:  # imported on the host, as part of causaltrace.tools
    from causaltrace.tools import worker_protocol as protocol
else:  # run as a script in the sandbox: only the worker files are bound beside this one
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import worker_protocol as protocol

    del sys.path[0]

_PID = struct.Struct("=i")
_MAX_REQUEST = 64 * 1024 * 1024
_MAIN_PID = os.getpid()
# Exit status of a REPL that could not stop the threads a call left running (no successor could
# be forked, e.g. at the process limit); the host reports it to the agent.
EXIT_STRAY_THREADS = 86
# The worker's own references, taken before any agent code runs: agent code that replaces
# ``os.write`` or ``os.dup2`` breaks only its own namespace, not the worker.
_write, _close, _dup2 = os.write, os.close, os.dup2
_forking = False  # true while the REPL forks its own successor (the channel stays open then)
_warm = False  # set by warm(): the libraries are imported and their set-up paths ran


class _Channel(protocol.Channel):
    """The protocol pipes; a process forked by agent code closes its copies at once."""

    def close_in_forked_child(self) -> None:
        if not _forking:  # a fork of agent code: it must not reach the protocol pipes
            self.close()


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


def _trim_heap() -> None:
    """Return free heap memory to the system (glibc keeps it otherwise)."""
    with contextlib.suppress(Exception):
        # lazy: the sandboxed worker imports after its resource limits
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)


def _tasks() -> frozenset[str]:
    """Thread ids of this process (every thread, Python's or a library's)."""
    try:
        return frozenset(os.listdir("/proc/self/task"))
    except OSError:
        return frozenset()


def _exit_code(status: int) -> int:
    """A wait status as the exit code a shell would show (128 + N for signal N)."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _supervise(repl: int, succession: int) -> None:
    """PID 1 of the sandbox: reap every orphan; when the REPL dies, end the sandbox.

    A REPL that sheds its threads forks a successor, which writes its PID to ``succession``
    before it kills its predecessor; the successor then is the REPL. When the REPL dies without
    a successor (a crash, ``os._exit``, the OOM killer), this process exits with the REPL's
    status, which ends the PID namespace and so every process left in it.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # PID 1: signals without a handler are ignored
    os.set_blocking(succession, False)
    pending = b""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid != repl:
            continue  # an orphan (or the old REPL after a hand-over): reaped, nothing to do
        successor = 0
        with contextlib.suppress(OSError, TypeError):
            while chunk := os.read(succession, 4096):
                pending += chunk
        while len(pending) >= _PID.size:
            (successor,) = _PID.unpack(pending[: _PID.size])
            pending = pending[_PID.size :]
        if successor > 1:
            try:
                if os.waitpid(successor, os.WNOHANG) == (0, 0):  # alive, and our child now
                    repl = successor
                    continue
            except ChildProcessError:
                pass
        os._exit(_exit_code(status))


class Worker:
    """The REPL state of one episode."""

    def __init__(self, config: dict, succession: int | None = None) -> None:
        self.config = config
        self.max_chars = int(config["max_output_chars"])
        self.data_dir = config["data_dir"]
        self.sandboxed = bool(config["sandboxed"])
        # Set when a supervisor (PID 1) adopts a successor: threads can then be shed by forking.
        self.succession = succession
        self.namespace: dict | None = None
        self.cell = 0
        self.fd_capture = None
        self.builtins = dict(builtins.__dict__)
        self.shed = 0

    # -- requests --------------------------------------------------------------------------
    def ready(self) -> dict:
        if not _warm:
            warm(self.config["preload"])
        self.fd_capture = _capture_file()
        return protocol.greeting(supervised=self.succession is not None)

    def load(self, request: dict) -> dict:
        if self.namespace is not None:
            return {"ok": False, "error": "this worker already serves an episode"}
        # lazy: the sandboxed worker imports after its resource limits
        import pandas as pd

        pd.set_option("display.max_rows", 60)
        pd.set_option("display.max_columns", 30)
        pd.set_option("display.width", 160)
        tables = {}
        for name in sorted(os.listdir(self.data_dir)):
            path = os.path.join(self.data_dir, name)
            if name.endswith(".arrow"):
                tables[name[: -len(".arrow")]] = _mapped_frame(path)
            elif name.endswith(".parquet"):
                tables[name[: -len(".parquet")]] = pd.read_parquet(path)
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
        self._restore_builtins()
        out = _CappedText(self.max_chars)
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out
        fd_text, fd_size = "", 0
        threads = _tasks()
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
            self._restore_builtins()  # first: what follows uses builtins
            sys.stdout, sys.stderr = saved
            fd_text, fd_size = self._fd_capture_end(capture)
            self._end_call(threads)
            if time.monotonic() - started > 0.02:  # real work: give freed memory back
                _trim_heap()
        if self.shed:
            print(
                f"[{self.shed} thread(s) still running when this code ended (started by it or by "
                "a library it used) were stopped: threads do not outlive a call]",
                file=out,
            )
            self.shed = 0
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
        self._restore_builtins()
        return repr(value)

    def _restore_builtins(self) -> None:
        """Undo what agent code deleted or replaced in ``builtins`` (additions stay).

        The namespace's ``__builtins__`` is the interpreter's one module, which the worker's own
        code uses too: ``del builtins.open`` would otherwise break the tool for the rest of the
        episode.
        """
        current = builtins.__dict__
        for name, value in self.builtins.items():
            if current.get(name, current) is not value:
                current[name] = value
        if self.namespace is not None and self.namespace.get("__builtins__") is not builtins:
            self.namespace["__builtins__"] = builtins

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
        """Point fds 1 and 2 at the capture file, for output written below Python (C, children)."""
        try:
            if self.fd_capture is None:
                self.fd_capture = _capture_file()
            os.ftruncate(self.fd_capture, 0)
            os.lseek(self.fd_capture, 0, os.SEEK_SET)
            _dup2(self.fd_capture, 1)
            _dup2(self.fd_capture, 2)
            return self.fd_capture
        except (OSError, TypeError):
            return None

    def _fd_capture_end(self, fd) -> tuple[str, int]:
        """Output written to fds 1 and 2 during the call (its start) and its size in bytes."""
        if fd is None:
            return "", 0
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            _dup2(devnull, 1)
            _dup2(devnull, 2)
            _close(devnull)
            size = os.fstat(fd).st_size
            data = os.pread(fd, min(size, self.max_chars * 4), 0)
            os.ftruncate(fd, 0)
            return data.decode("utf-8", errors="replace"), size
        except OSError:
            return "", 0

    def _end_call(self, threads: frozenset[str]) -> None:
        """Stop whatever the call started: other processes always, new threads if any."""
        if not self.sandboxed:
            return
        # A thread the call started, or a library thread still running agent Python code.
        stray = len(_tasks() - threads) or len(sys._current_frames()) - 1
        if stray and self.succession is not None:
            self._shed_threads()
            self.shed = stray
        self._reap()

    def _shed_threads(self) -> None:
        """Continue in a forked copy of this process (a fork has only the calling thread).

        The successor announces itself to the supervisor and returns; :meth:`_reap` then kills
        this process with every thread the call left running. This process never returns.
        """
        global _MAIN_PID, _forking
        _forking = True
        try:
            pid = os.fork()
        except OSError:  # e.g. at RLIMIT_NPROC: the threads cannot be stopped, so stop all
            os._exit(EXIT_STRAY_THREADS)
        finally:
            _forking = False
        if pid == 0:
            _MAIN_PID = os.getpid()
            try:
                _write(self.succession, _PID.pack(_MAIN_PID))
            except OSError:
                os._exit(EXIT_STRAY_THREADS)
            return
        while True:  # the successor kills this process (and its threads) in _reap
            time.sleep(60)

    def _reap(self) -> None:
        """Kill every other process of the sandbox: nothing agent code starts outlives a call.

        Only inside a sandbox, where this process has its own PID namespace (``kill(-1)`` then
        reaches only the sandbox, and never its PID 1); never in unsandboxed mode.
        """
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            return  # nothing else runs in the sandbox
        # Wait until the killed processes are gone (this process collects its own children, the
        # supervisor the orphans) so that they stop counting against RLIMIT_NPROC. Killed
        # processes exit promptly; do not wait for long on one stuck in the kernel.
        me = os.getpid()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            try:
                others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
            except OSError:
                return
            if not others:
                return
            time.sleep(0.002)


def _capture_file() -> int | None:
    """An unnamed file for output written to fds 1 and 2: in the sandbox's private ``/tmp``
    (bounded by its size; memfds are not available in a sandbox), else a memfd."""
    with contextlib.suppress(OSError, AttributeError):
        return os.open(os.environ.get("TMPDIR", "/tmp"), os.O_TMPFILE | os.O_RDWR, 0o600)
    with contextlib.suppress(OSError, AttributeError):
        return os.memfd_create("python-tool-output", 0)
    return None


def _mapped_frame(path: str):
    """A DataFrame over an Arrow IPC file mapped copy-on-write: equal to ``pd.read_parquet`` of
    the same table (dtypes, index, values), with its numeric and date columns in the mapping.

    Those pages are the page cache's, shared by every worker of the episode. The mapping is
    private and writable, so agent code can assign into a DataFrame as with any other (pandas
    refuses to write into Arrow's read-only buffers): a write copies the page it touches into
    this process, never into the file (opened read-only) or another worker's view. No
    descriptor of the file stays open (:func:`_map_private`).
    """
    # lazy: the sandboxed worker imports after its resource limits
    import numpy as np

    # lazy: the sandboxed worker imports after its resource limits
    import pandas as pd

    # lazy: the sandboxed worker imports after its resource limits
    import pyarrow as pa

    # lazy: the sandboxed worker imports after its resource limits
    import pyarrow.ipc

    mapping, size = _map_private(path)
    table = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(mapping))).read_all()
    frame = table.to_pandas(split_blocks=True)  # zero-copy where the layout allows
    whole = np.frombuffer(mapping, np.uint8)
    low = whole.ctypes.data
    columns = {}
    for i, name in enumerate(frame.columns):
        column = frame.iloc[:, i]
        if isinstance(column.dtype, np.dtype):  # numbers, dates: re-point at the writable map
            values = column.to_numpy(copy=False)
            address = values.__array_interface__["data"][0]
            if values.flags.writeable:
                pass
            elif values.flags.c_contiguous and low <= address <= low + size - values.nbytes:
                values = np.frombuffer(mapping, values.dtype, len(values), address - low)
            else:
                values = values.copy()
            column = pd.Series(values, index=frame.index, name=name, copy=False)
        columns[name] = column
    out = pd.DataFrame(columns, index=frame.index, copy=False)
    out.attrs.update(frame.attrs)
    return out


def _map_private(path: str):
    """Map the file at ``path`` private and writable (copy-on-write), and close it.

    ``mmap.mmap`` keeps a duplicate of the file's descriptor for as long as the mapping lives,
    and agent code could ``os.fstat`` it (the size and times of a table file, which the slot no
    longer shows). Mapped with ``mmap(2)`` directly, the mapping needs no descriptor at all. It
    is never unmapped: the tables live as long as the worker, which serves one episode. Returns
    a writable buffer over the mapping and its size.
    """
    # lazy: the sandboxed worker imports after its resource limits
    import ctypes

    # lazy: the sandboxed worker imports after its resource limits
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise OSError(f"{os.path.basename(path)} is empty")
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        address = libc.mmap(None, size, prot, mmap.MAP_PRIVATE, fd, 0)
        if address is None or address == ctypes.c_void_p(-1).value:
            raise OSError(ctypes.get_errno(), f"mmap {os.path.basename(path)}")
    finally:
        os.close(fd)
    return (ctypes.c_char * size).from_address(address), size


def _single_threaded_duckdb() -> None:
    """DuckDB databases opened by agent code run without threads of their own by default.

    A DuckDB database otherwise starts worker and I/O threads when it opens; threads that a
    call leaves behind are shed after it (see the module docstring), and a database whose
    threads were shed crashes when it is closed. Agent code may still ask for threads
    (``config={"threads": 4}``); they are then stopped after the call.
    """
    # lazy: the sandboxed worker imports after its resource limits
    import duckdb

    default = duckdb.default_connection()
    known = {row[0] for row in default.execute("SELECT name FROM duckdb_settings()").fetchall()}
    settings = {k: v for k, v in (("threads", 1), ("async_threads", 0)) if k in known}
    for key, value in settings.items():
        default.execute(f"SET {key} = {value}")  # the connection behind duckdb.sql()
    connect = duckdb.connect

    def connect_without_threads(database=":memory:", read_only=False, config=None, **kwargs):
        config = dict(config or {})
        for key, value in settings.items():
            config.setdefault(key, value)
        return connect(database, read_only, config, **kwargs)

    connect_without_threads.__doc__ = connect.__doc__
    duckdb.connect = connect_without_threads


def warm(preload: list[str]) -> None:
    """Import the data packages and run the Parquet, display and DuckDB set-up paths once.

    A fork server (``fork_server.py``) runs this before forking the workers, which then share
    what it built copy-on-write and skip it: done again in each worker it would cost ~14 MB of
    private memory per worker (pages of the shared heap touched and copied).
    """
    global _warm
    for name in preload:
        importlib.import_module(name)
    if "pandas" in sys.modules:
        # lazy: the sandboxed worker imports after its resource limits
        import io

        # lazy: the sandboxed worker imports after its resource limits
        import pandas as pd

        buffer = io.BytesIO()
        pd.DataFrame({"a": [1.0], "b": ["x"]}).to_parquet(buffer)
        buffer.seek(0)
        repr(pd.read_parquet(buffer))
    if "duckdb" in sys.modules:
        with contextlib.suppress(Exception):
            _single_threaded_duckdb()
    _warm = True


def main() -> None:
    global _MAIN_PID
    config = json.loads(sys.argv[1])
    for path in config["site"]:
        sys.path.append(path)
    sandboxed = bool(config["sandboxed"])
    protocol.apply_limits(config["limits"], sandboxed)
    channel = _Channel(_MAX_REQUEST)
    succession = None
    if sandboxed and os.getpid() == 1:
        # PID 1 of the sandbox: become the supervisor, and run the REPL in a child.
        read_end, succession = os.pipe()
        repl = os.fork()
        if repl:
            channel.close()
            _close(succession)
            _supervise(repl, read_end)
        _close(read_end)
        _MAIN_PID = os.getpid()
    os.register_at_fork(after_in_child=channel.close_in_forked_child)
    worker = Worker(config, succession)
    protocol.serve(channel, worker.ready, {"load": worker.load, "exec": worker.execute})


if __name__ == "__main__":
    main()
