"""The ``sql`` tool: read-only DuckDB over one episode's visible tables, in a sandboxed process.

Agent SQL never runs in the host process. Each episode gets its own worker process
(``sql_worker.py``) holding the episode's DuckDB database, started in the same kind of sandbox
as the ``python`` tool (bubblewrap or ``unshare``; only the ``duckdb`` distribution is visible)
and driven over pipes. A hard limit holds whatever DuckDB does:

* **memory**: the worker's ``RLIMIT_DATA`` (and a looser ``RLIMIT_AS``) bound everything it
  allocates, including what DuckDB's list functions allocate outside its own ``memory_limit``;
  past it the query fails with an out-of-memory error, and the host's memory never grows;
* **time**: a watchdog in the worker interrupts a query at ``sql_timeout``; a query that
  ignores interrupts (DuckDB's list functions do) is killed with its process at the time limit
  plus :data:`KILL_GRACE` seconds (with every process of its sandbox), and a fresh worker opens
  the episode's database again (it is read-only, so nothing is lost); ``RLIMIT_CPU`` is a
  backstop;
* **isolation**: each episode has its own process, so a stuck query delays no other episode;
  calls of one episode run one at a time.

The episode's tables are stored in a DuckDB database file, built once by the host from the
episode's (trusted) Parquet files and shared by every live episode with the same files (an RL
rollout group): :class:`SqlDatabases`. The file is hard-linked into each worker's read-only data
directory and opened **read-only**, with external access off and the configuration locked; every
statement is checked first, recursively (see ``sql_worker.py``). Warm workers (DuckDB imported,
no episode yet) are kept by a :class:`SqlPool`, like the Python workers; restarting a killed
worker only opens the same file again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import shutil
import struct
from pathlib import Path
from typing import Any, ClassVar

from causaltrace.core import untrusted
from causaltrace.tools.config import MiB, ToolConfig, ToolError
from causaltrace.tools.derived import DerivedFiles
from causaltrace.tools.episode_data import EpisodeData
from causaltrace.tools.pool import SandboxProcess, WorkerDied, WorkerPool
from causaltrace.tools.sandbox import SANDBOX_SITE, Launcher
from causaltrace.tools.sql_worker import TIME_LIMIT_HINT, format_value, render_table

__all__ = [
    "KEEP_BYTES",
    "KEEP_FILES",
    "KILL_GRACE",
    "SqlDatabases",
    "SqlPool",
    "SqlProcess",
    "SqlProcessDied",
    "SqlTool",
    "format_value",
    "parse_size",
    "render_table",
    "sql_launcher",
    "sql_limits",
]

log = logging.getLogger("causaltrace.tools")

# Seconds a query may run past ``sql_timeout`` (when it ignores the interrupt) before its
# process is killed.
KILL_GRACE = 0.5
MAX_QUERY_CHARS = 1_000_000
_HEADER = struct.Struct(">I")
_UNITS = {
    "": 1,
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")
_SIGNAL_HINTS = {
    "SIGKILL": ": the kernel or the host stopped it, most likely for using too much memory",
    "SIGXCPU": ": the CPU time limit of the SQL process was reached",
    "SIGSEGV": ": DuckDB crashed",
    "SIGABRT": ": DuckDB aborted",
}


def parse_size(text: str) -> int:
    """Bytes of a DuckDB size such as ``"1GB"`` (10^9) or ``"512MiB"`` (2^20 units)."""
    match = _SIZE.fullmatch(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ToolError(
            f"ToolConfig.sql_memory_limit must be a size such as '1GB' or '512MiB', got {text!r}"
        )
    return int(float(match.group(1)) * _UNITS[unit])


def sql_limits(config: ToolConfig) -> dict[str, int]:
    """Resource limits of each SQL worker process, derived from the tool config.

    ``data_bytes`` (RLIMIT_DATA) is twice DuckDB's ``memory_limit`` (at least it plus 512 MiB):
    the buffer pool, plus what DuckDB allocates outside it (list functions, results), plus the
    interpreter. ``file_bytes`` is 0: the worker writes no file at all.
    """
    memory = parse_size(config.sql_memory_limit)
    return {
        "data_bytes": max(2 * memory, memory + 512 * MiB),
        "file_bytes": 0,
        "cpu_seconds": int(config.cpu_seconds),
        "open_files": int(config.max_open_files),
        "processes": 16 + int(config.sql_threads),
    }


def sql_launcher(launcher: Launcher, config: ToolConfig) -> Launcher:
    """A launcher of the same kind as the Python tool's whose sandbox shows only the ``duckdb``
    distribution (and its dependencies)."""
    # preload: what its fork server imports (the SQL worker imports DuckDB on its own anyway)
    sql_config = dataclasses.replace(config, sandbox_packages=("duckdb",), preload=("duckdb",))
    return type(launcher)(sql_config)


DATABASE_FILE = "episode.duckdb"
# Database files kept after their last episode closed, for later episodes of the same files.
KEEP_FILES = 64
KEEP_BYTES = 512 * MiB


def build_database(episode: EpisodeData, target: Path, config: ToolConfig) -> None:
    """Store the episode's tables in a DuckDB database file at ``target`` (atomically; the
    file is world-readable and read-only). Only fixed statements run here, on the episode's own
    Parquet files: no agent input reaches the host's DuckDB."""
    # lazy: the host process rarely needs it; tool start-up stays fast
    import duckdb

    tmp = target.with_name(f".{target.name}.{os.urandom(6).hex()}.tmp")
    try:
        con = duckdb.connect(
            str(tmp),
            config={"threads": config.sql_threads, "memory_limit": config.sql_memory_limit},
        )
        try:
            for name, path in sorted(episode.tables.items()):
                try:
                    con.execute(
                        f'CREATE TABLE "{name}" AS SELECT * FROM read_parquet(?)', [str(path)]
                    )
                except duckdb.Error as exc:
                    raise ToolError(f"{path.name}: {exc}") from None
        finally:
            con.close()  # checkpoints: the tables are stored compressed, no WAL is left
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            leftover.unlink(missing_ok=True)


class SqlDatabases(DerivedFiles):
    """The episodes' database files, one per distinct set of Parquet files and DuckDB version,
    shared by the live episodes that use them and built once (see :class:`DerivedFiles`); at
    most :data:`KEEP_FILES` unused files and :data:`KEEP_BYTES` in all are kept."""

    suffix = ".duckdb"

    def build(self, episode: EpisodeData, target: Path) -> None:
        build_database(episode, target, self.config)

    def version(self) -> str:
        # lazy: the host process rarely needs it; tool start-up stays fast
        import duckdb

        return duckdb.__version__

    def limits(self) -> tuple[int, int]:
        return KEEP_FILES, KEEP_BYTES


# The SQL worker dies the way any sandboxed worker does.
SqlProcessDied = WorkerDied


class SqlProcess(SandboxProcess):
    """One sandboxed SQL worker (``sql_worker.py``): DuckDB imported, one episode's database."""

    kind = "SQL worker"
    slot_prefix = "s"
    signal_hints = _SIGNAL_HINTS
    exit_hints: ClassVar[dict[int, str]] = {}

    @classmethod
    def program(cls, launcher: Launcher, slot: Path, config: ToolConfig) -> list[str]:
        worker_config = {
            "site": [SANDBOX_SITE] if launcher.sandboxed else list(launcher.runtime.host_site),
            "data_dir": launcher.data_dir(slot),
            "sandboxed": launcher.sandboxed,
            "threads": config.sql_threads,
            "memory_limit": config.sql_memory_limit,
            "max_rows": config.sql_max_rows,
            "max_chars": config.sql_max_chars,
            "limits": sql_limits(config),
        }
        return [launcher.script("sql_worker.py"), json.dumps(worker_config)]

    @classmethod
    def frame_limit(cls, config: ToolConfig) -> int:
        return 8 * config.sql_max_chars + 65536

    @classmethod
    def greeting_problem(cls, launcher: Launcher, hello: dict[str, Any]) -> str | None:
        if hello.get("error"):
            return f"it could not import DuckDB: {hello['error']}"
        return super().greeting_problem(launcher, hello)


class SqlPool(WorkerPool[SqlProcess]):
    """Keeps ``config.warm_workers`` started SQL workers ready, and the episodes' databases."""

    def __init__(self, launcher: Launcher, config: ToolConfig, slot_root: Path):
        super().__init__(launcher, config, slot_root, SqlProcess)
        self.databases = SqlDatabases(slot_root / "sql-databases", config)

    async def close(self) -> None:
        await super().close()
        await self.databases.close()


class SqlTool:
    """The ``sql`` tool of one episode: a worker process holding its read-only database.

    :meth:`run` never raises for what the query does: errors, refusals, time limits and a
    crashed or killed worker all come back as text, and the next call gets a fresh worker with
    the same tables (loaded in the background right after a kill).
    """

    def __init__(self, pool: SqlPool, episode: EpisodeData, config: ToolConfig):
        self.pool = pool
        self.episode = episode
        self.config = config
        self.restarts = 0
        self._process: SqlProcess | None = None
        self._loading: asyncio.Task[SqlProcess] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._closing: set[asyncio.Task[None]] = set()
        self._database: tuple[str, Path] | None = None
        self.file_bytes = 0

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(self.episode.tables)

    def start(self) -> None:
        """Start loading in the background (a warm worker is claimed and given the tables)."""
        if self._loading is None and self._process is None:
            self._loading = asyncio.get_running_loop().create_task(self._load())

    async def ready(self) -> SqlProcess:
        """The loaded worker (raises :class:`ToolError` if the episode cannot be loaded)."""
        if self._closed:
            raise ToolError("this episode's sql tool is closed")
        if self._process is not None and self._process.alive:
            return self._process
        if self._process is not None:  # it died between calls: replace it
            self._discard()
        if self._loading is None:
            self.start()
        assert self._loading is not None
        task = self._loading
        try:
            process = await asyncio.shield(task)
        except ToolError:
            if self._loading is task:
                self._loading = None  # the next call tries again
            raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._loading is task:
                self._loading = None
            raise ToolError(
                f"the sql tool could not load {str(self.episode.directory)!r}: {exc}"
            ) from exc
        if self._loading is task:
            self._loading = None
            self._process = process
        return process

    async def _load(self) -> SqlProcess:
        if self._database is None:  # built once per episode (or shared); a restart reuses it
            try:
                self._database = await self.pool.databases.acquire(self.episode)
            except (ToolError, OSError) as exc:
                raise ToolError(
                    f"the sql tool could not load {str(self.episode.directory)!r}: {exc}"
                ) from None
        process = await self.pool.claim()
        try:
            await asyncio.to_thread(_link, self._database[1], process.episode_dir / DATABASE_FILE)
            reply = await process.request(
                {"op": "load", "database": DATABASE_FILE, "tables": list(self.episode.tables)},
                self.config.worker_start_timeout,
            )
            if not reply.get("ok"):
                raise ToolError(
                    f"the sql tool could not load {str(self.episode.directory)!r}: "
                    f"{untrusted.text(reply, 'error')}"
                )
            self.file_bytes = untrusted.count(reply, "bytes")
            return process
        except SqlProcessDied as exc:
            await process.close()
            raise ToolError(
                f"the SQL worker died while loading {str(self.episode.directory)!r}: "
                f"{exc.reason}; {process.stderr_tail()}"
            ) from None
        except BaseException:
            await process.close()
            raise
        finally:
            self.pool.refill()

    def _discard(self) -> None:
        """Kill the current worker and start loading a replacement in the background."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            task = asyncio.get_running_loop().create_task(process.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        self.restarts += 1
        if not self._closed:
            self._loading = None
            self.start()

    async def run(self, query: str) -> str:
        """Run ``query`` in the episode's worker; its result (or the error) as capped text."""
        if not isinstance(query, str) or not query.strip():
            return "Error: the query is empty."
        if len(query) > MAX_QUERY_CHARS:
            return (
                f"Error: the query is {len(query)} characters long; the sql tool takes at most "
                f"{MAX_QUERY_CHARS}."
            )
        async with self._lock:
            process = await self.ready()
            timeout = float(self.config.sql_timeout)
            try:
                reply = await process.request(
                    {"op": "query", "query": query, "timeout": timeout}, timeout + KILL_GRACE
                )
            except TimeoutError:
                self._discard()
                return (
                    f"Error: the query was stopped after {timeout:g} s (time limit). "
                    f"{TIME_LIMIT_HINT}"
                )
            except SqlProcessDied as exc:
                self._discard()
                return (
                    f"Error: the query stopped the SQL process ({exc.reason}). The tables are "
                    f"loaded again for the next query. {TIME_LIMIT_HINT}"
                )
            except asyncio.CancelledError:
                # The caller gave up: the worker may still be running the query. Replace it.
                self._discard()
                raise
            if reply.get("ok") is not True:
                return f"Error: {untrusted.text(reply, 'error') or 'the SQL process failed'}"
            return untrusted.text(reply, "text")

    async def memory(self) -> dict[str, int]:
        """DuckDB's own account of its memory, the database file's size and the process PSS."""
        async with self._lock:
            process = await self.ready()
            try:
                reply = await process.request({"op": "memory"}, self.config.sql_timeout)
            except (TimeoutError, SqlProcessDied):
                return {"sql_bytes": 0, "sql_file_bytes": 0, "sql_pss_bytes": 0}
            return {
                "sql_bytes": untrusted.count(reply, "bytes"),
                "sql_file_bytes": untrusted.count(reply, "file_bytes"),
                "sql_pss_bytes": process.memory_pss(),
            }

    async def close(self) -> None:
        self._closed = True
        loading, self._loading = self._loading, None
        if loading is not None:
            loading.cancel()
            with contextlib.suppress(BaseException):
                process = await loading
                await process.close()
        process, self._process = self._process, None
        if process is not None:
            await process.close()
        for task in list(self._closing):
            with contextlib.suppress(BaseException):
                await task
        database, self._database = self._database, None
        if database is not None:
            self.pool.databases.release(database[0])


def _link(source: Path, target: Path) -> None:
    """Hard-link the database file into a worker's slot (a copy across file systems)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
        os.chmod(target, 0o444)
