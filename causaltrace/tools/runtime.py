"""The asyncio API: one :class:`ToolRuntime` per process, one :class:`EpisodeTools` per episode.

RL rollouts run many episodes concurrently in one event loop::

    async with ToolRuntime(ToolConfig()) as runtime:
        async with runtime.episode("/data/ep-000017/visible") as tools:
            print(await tools.sql("SELECT count(*) FROM orders"))
            print(await tools.python("orders.groupby('region').revenue.sum()"))

Both tools run agent input in sandboxed worker processes, one of each per episode (the
``python`` REPL, and a DuckDB process holding the episode's read-only database), never in this
process. Tool calls never raise for anything the agent does: bad SQL, exceptions, timeouts, a
crashed worker all come back as text. They raise only for host-side problems (closed episode, no
sandbox). :class:`SyncToolRuntime` and :func:`open_tools` wrap the same API for blocking code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from causaltrace.core import untrusted
from causaltrace.tools.config import (
    GiB,
    SandboxError,
    SandboxUnavailableError,
    ToolConfig,
    ToolError,
)
from causaltrace.tools.episode_data import EpisodeData
from causaltrace.tools.fork_keeper import ForkServerKeeper
from causaltrace.tools.forking import ForkServer
from causaltrace.tools.pool import SandboxProcess, WorkerDied, WorkerPool, WorkerProcess
from causaltrace.tools.sandbox import Launcher, select_launcher
from causaltrace.tools.shared_tables import ArrowTables
from causaltrace.tools.sql import SqlPool, SqlProcess, SqlTool, sql_launcher

log = logging.getLogger("causaltrace.tools")
TOOL_NAMES = ("sql", "python")
# The longest code one python call takes (characters), like the sql tool's MAX_QUERY_CHARS:
# longer code is refused with a message before it reaches the worker (whose request limit,
# 64 MiB of JSON, it could otherwise pass and end the worker).
MAX_CODE_CHARS = 1_000_000


class ToolRuntime:
    """Process-wide state: the sandbox launcher and the warm pools of Python and SQL workers.

    Args:
        config: The sandbox, limits and pool settings; :class:`ToolConfig` defaults by default.
    """

    def __init__(self, config: ToolConfig | None = None):
        self.config = config or ToolConfig()
        self.launcher: Launcher | None = None
        self.pool: WorkerPool | None = None
        self.sql_pool: SqlPool | None = None
        self._slot_root: Path | None = None
        self._episodes: set[EpisodeTools] = set()
        self._fork_keepers: list[ForkServerKeeper] = []
        self.arrow_tables: ArrowTables | None = None

    @property
    def sandbox(self) -> str:
        """Name of the isolation in use: ``"bwrap"``, ``"unshare"`` or ``"none"``."""
        if self.launcher is None:
            raise ToolError("ToolRuntime is not started; use 'async with ToolRuntime(...)'")
        return self.launcher.name

    async def start(self) -> ToolRuntime:
        if self.pool is not None:
            return self
        self.launcher = await asyncio.to_thread(select_launcher, self.config)
        self._slot_root = Path(tempfile.mkdtemp(prefix="causaltrace-tools-"))
        # If close() is never called, still remove the slots at exit (sandboxes die with us).
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._slot_root), True)
        sql = sql_launcher(self.launcher, self.config)
        # Both servers import their libraries at once; if either fails (under "on"), both close.
        failures = [
            result
            for result in await asyncio.gather(
                self._start_fork_server(self.launcher, WorkerProcess),
                self._start_fork_server(sql, SqlProcess),
                return_exceptions=True,
            )
            if isinstance(result, BaseException)
        ]
        if failures:
            await self._close_fork_servers()
            raise failures[0]
        self.arrow_tables = ArrowTables(self._slot_root / "arrow-tables", self.config)
        self.pool = WorkerPool(self.launcher, self.config, self._slot_root)
        self.pool.start()
        self.sql_pool = SqlPool(sql, self.config, self._slot_root)
        self.sql_pool.start()
        return self

    async def _start_fork_server(self, launcher: Launcher, process: type[SandboxProcess]) -> None:
        """Run a fork server for ``launcher`` per ``ToolConfig.fork_server``, once a worker
        forked from it (``process``) has started: a kernel that refuses a step of a fork's
        sandbox then costs the fork server, not every worker ("auto" falls back). A keeper
        (``fork_keeper.py``) restarts the server if it dies later."""
        if self.config.fork_server == "off" or not launcher.sandboxed:
            return
        assert self._slot_root is not None
        slot_root = self._slot_root

        async def start_server() -> ForkServer:
            server = await ForkServer.start(launcher, self.config, slot_root)
            launcher.fork_server = server
            try:
                probe = await process.start(launcher, slot_root, self.config)
                await probe.close()
            except BaseException:
                launcher.fork_server = None
                await server.close()
                raise
            return server

        keeper = ForkServerKeeper(launcher, start_server, on_restart=self._refresh_pools)
        try:
            await keeper.start()
        except (SandboxUnavailableError, SandboxError) as exc:
            if self.config.fork_server == "on":
                raise
            # Expected where the launcher has none (unshare); worth a warning elsewhere.
            quiet = isinstance(exc, SandboxUnavailableError)
            log.log(
                logging.INFO if quiet else logging.WARNING,
                "no fork server (%s): one sandbox per worker",
                exc,
            )
            return
        self._fork_keepers.append(keeper)

    def _refresh_pools(self) -> None:
        """After a fork server restarted: drop the idle workers that died with the old one and
        refill the pools (from the new one)."""
        for pool in (self.pool, self.sql_pool):
            if pool is not None:
                pool.prune()

    async def _close_fork_servers(self) -> None:
        keepers, self._fork_keepers = self._fork_keepers, []
        for keeper in keepers:
            await keeper.close()

    @property
    def forking(self) -> bool:
        """Whether workers are forked from a warm fork server right now (``ToolConfig.
        fork_server``): False without one, and while a server that died is being restarted."""
        return bool(self._fork_keepers) and all(k.running for k in self._fork_keepers)

    @property
    def fork_server_restarts(self) -> int:
        """How many times a fork server of this runtime was restarted after it stopped."""
        return sum(k.restarts for k in self._fork_keepers)

    async def wait_warm(self, timeout: float | None = None) -> None:
        """Wait until ``warm_workers`` Python and SQL workers are started and idle (raises if
        they fail).

        Args:
            timeout: Seconds to wait; no limit by default.

        Raises:
            ToolError: The runtime is not started, or a worker failed to start.
        """
        if self.pool is None or self.sql_pool is None:
            raise ToolError("ToolRuntime is not started; use 'async with ToolRuntime(...)'")
        await asyncio.gather(self.pool.wait_warm(timeout), self.sql_pool.wait_warm(timeout))

    async def close(self) -> None:
        for episode in list(self._episodes):
            await episode.close()
        if self.pool is not None:
            await self.pool.close()
        if self.sql_pool is not None:
            await self.sql_pool.close()
        await self._close_fork_servers()
        if self.arrow_tables is not None:
            await self.arrow_tables.close()
            self.arrow_tables = None
        if self._slot_root is not None:
            self._cleanup()
        self.pool = self.sql_pool = self._slot_root = None

    async def __aenter__(self) -> ToolRuntime:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def episode(self, episode_dir: str | os.PathLike[str]) -> EpisodeTools:
        """The tools of one episode; use as ``async with`` (or call ``start``/``close``).

        Args:
            episode_dir: The episode's visible directory (its tables and prompt).

        Raises:
            ToolError: The runtime is not started.
        """
        if self.pool is None:
            raise ToolError("ToolRuntime is not started; use 'async with ToolRuntime(...)'")
        return EpisodeTools(self, episode_dir)


class EpisodeTools:
    """The ``sql`` and ``python`` tools of one episode.

    :meth:`start` only checks the episode directory and sets both tools loading in the
    background (a warm Python and a warm SQL worker are claimed and given the files), so that
    loading overlaps with whatever comes before the agent's first call (its first generation).
    A tool call waits for its own tool; :meth:`ready` waits for both and raises any loading
    error. Calls of one episode run one at a time, in call order; calls of different episodes
    run concurrently.

    Args:
        runtime: The started runtime whose pools serve the tools.
        episode_dir: The episode's visible directory.
    """

    def __init__(self, runtime: ToolRuntime, episode_dir: str | os.PathLike[str]):
        self.runtime = runtime
        self.config = runtime.config
        self.episode_dir = Path(episode_dir)
        self.episode: EpisodeData | None = None
        self._sql: SqlTool | None = None
        self._worker: WorkerProcess | None = None
        self._worker_loading: asyncio.Task[WorkerProcess] | None = None
        self._sql_lock = asyncio.Lock()
        self._python_lock = asyncio.Lock()
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.restarts = 0

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(self.episode.tables) if self.episode else ()

    async def start(self, wait: bool = False) -> EpisodeTools:
        """Validate the episode and start loading both tools; with ``wait``, also :meth:`ready`.

        Args:
            wait: Also wait until both tools are loaded; off by default.

        Raises:
            ToolError: The tools are closed, or (with ``wait``) one failed to load.
        """
        if self._closed:
            raise ToolError("this episode's tools are closed")
        if self.episode is None:
            self.episode = EpisodeData.from_dir(self.episode_dir)
            self.runtime._episodes.add(self)
            assert self.runtime.sql_pool is not None
            self._sql = SqlTool(self.runtime.sql_pool, self.episode, self.config)
            self._sql.start()
            self._worker_loading = asyncio.get_running_loop().create_task(self._new_worker())
        if wait:
            await self.ready()
        return self

    async def ready(self) -> None:
        """Wait until both tools are loaded; raise :class:`ToolError` if one failed to load."""
        self._check_open()
        async with self._sql_lock:
            await self._sql_tool()
        async with self._python_lock:
            await self._python_worker()

    async def _sql_tool(self) -> SqlTool:
        """The loaded SQL tool (called under the sql lock)."""
        assert self._sql is not None
        await self._sql.ready()
        return self._sql

    async def _python_worker(self) -> WorkerProcess:
        """The loaded worker (called under the python lock)."""
        if self._worker is None:
            task, self._worker_loading = self._worker_loading, None
            self._worker = await asyncio.shield(task) if task else await self._new_worker()
        return self._worker

    async def __aenter__(self) -> EpisodeTools:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        self.runtime._episodes.discard(self)
        loading, self._worker_loading = self._worker_loading, None
        if loading is not None:
            with contextlib.suppress(BaseException):
                self._worker = self._worker or await loading
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.close()
        sql, self._sql = self._sql, None
        if sql is not None:
            await sql.close()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    def _check_open(self) -> None:
        if self._closed or self.episode is None:
            raise ToolError(
                "episode tools are not started or already closed; use 'async with "
                "runtime.episode(dir) as tools'"
            )

    async def _new_worker(self) -> WorkerProcess:
        assert self.runtime.pool is not None and self.episode is not None
        pool = self.runtime.pool
        worker = await pool.claim()
        try:
            tables = None
            if self.runtime.arrow_tables is not None:
                arrow = self.runtime.arrow_tables
                try:
                    key, directory = await arrow.acquire(self.episode)
                except ToolError as exc:
                    raise ToolError(
                        f"the python worker could not load the episode: {exc}"
                    ) from None
                worker.on_close.append(lambda: arrow.release(key))
                tables = ArrowTables.files(directory)
            await asyncio.to_thread(self.episode.install_into, worker.episode_dir, tables)
            reply = await worker.request({"op": "load"}, self.config.worker_start_timeout)
            if not reply.get("ok"):
                raise ToolError(
                    f"the python worker could not load the episode: {untrusted.text(reply, 'error')}"
                )
            await asyncio.to_thread(self.episode.remove_tables_from, worker.episode_dir)
            worker.loaded = True
            return worker
        except WorkerDied as exc:
            await worker.close()
            raise ToolError(
                f"the python worker died while loading {str(self.episode_dir)!r}: {exc.reason}; "
                f"{worker.stderr_tail()}"
            ) from None
        except BaseException:
            await worker.close()
            raise
        finally:
            pool.refill()

    # -- tools -----------------------------------------------------------------------------
    async def sql(self, query: str) -> str:
        """Run a read-only DuckDB query in the episode's SQL worker; the result (or error) as
        text.

        Args:
            query: The SQL query.
        """
        self._check_open()
        async with self._sql_lock:
            sql = await self._sql_tool()
            return await sql.run(query)

    async def python(self, code: str) -> str:
        """Execute code in the episode's persistent namespace; its output as text.

        Args:
            code: The Python code (errors come back as text, not exceptions).
        """
        self._check_open()
        if not isinstance(code, str):
            return "Error: code must be a string."
        if len(code) > MAX_CODE_CHARS:
            return (
                f"Error: the code is {len(code)} characters long; the python tool takes at most "
                f"{MAX_CODE_CHARS}. Nothing ran; the Python namespace is unchanged."
            )
        async with self._python_lock:
            timeout = self.config.python_timeout
            worker = await self._python_worker()
            limit = self.config.memory_bytes
            guard = asyncio.get_running_loop().create_task(worker.hold_memory(limit))
            try:
                reply = await worker.request({"op": "exec", "code": code}, timeout)
            except TimeoutError:
                return await self._restart(
                    f"Error: the code was still running after {timeout:g} s (time limit) and "
                    "was stopped."
                )
            except WorkerDied as exc:
                if worker.memory_exceeded is not None:
                    return await self._restart(
                        f"Error: the code's processes held {worker.memory_exceeded / GiB:.2f} GiB "
                        f"of memory together, over the sandbox's {limit / GiB:.2f} GiB "
                        "(memory_bytes, counted over every process it runs), and were stopped."
                    )
                return await self._restart(
                    f"Error: the Python process stopped while running this code ({exc.reason})."
                )
            except asyncio.CancelledError:
                # The caller gave up on this call: the worker may still be running it, so it
                # cannot serve the next one. Replace it on the next call.
                worker, self._worker = self._worker, None
                if worker is not None:
                    self._background(worker.close())
                raise
            finally:
                guard.cancel()
            await worker.reap_strays(untrusted.count(reply, "pid"))
            if reply.get("ok") is not True:
                return f"Error: {untrusted.text(reply, 'error') or 'the python worker failed'}"
            return self._render(reply)

    def _background(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _restart(self, message: str) -> str:
        worker, self._worker = self._worker, None
        self.restarts += 1
        if worker is not None:
            await worker.close()
        try:
            self._worker = await self._new_worker()
            tail = (
                " The Python namespace was restarted: variables from earlier calls are gone; "
                "the episode's tables are loaded again."
            )
        except Exception:
            tail = " The Python namespace could not be restarted yet; it will be on the next call."
        return message + tail

    def _render(self, reply: Mapping[str, Any]) -> str:
        """Join stdout, low-level output and the error or value; cap and say what was cut."""
        cap = self.config.python_max_output_chars
        parts, dropped = [], 0
        # The reply is the worker's, which agent code can forge: every field is type-checked.
        for key in ("stdout", "fd_output", "error" if untrusted.text(reply, "error") else "result"):
            text = untrusted.text(reply, key)
            dropped += max(0, untrusted.count(reply, key + "_total") - len(text))
            if text:
                parts.append(text.rstrip("\n"))
        body = "\n".join(parts)
        full = len(body) + dropped
        if full > cap:
            body = body[:cap].rstrip("\n")
            body += f"\n[output truncated: showing the first {len(body)} of {full} characters]"
        return body or "(no output)"

    async def call(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Dispatch a tool call as an LLM emits it: a name and JSON (or dict) arguments.

        Args:
            name: ``"sql"`` or ``"python"``.
            arguments: ``{"query": ...}`` or ``{"code": ...}``, as JSON text or a mapping.

        Returns:
            The tool's output, or an error message for a bad call (never raises on one).
        """
        if isinstance(arguments, str):
            try:
                arguments = untrusted.loads(arguments, "the arguments") if arguments.strip() else {}
            except ValueError as exc:
                return f"Error: {exc}"
        if not isinstance(arguments, Mapping):
            return "Error: the arguments must be a JSON object."
        if name == "sql":
            query = arguments.get("query")
            if not isinstance(query, str):
                return "Error: the sql tool needs a string argument 'query'."
            return await self.sql(query)
        if name == "python":
            code = arguments.get("code")
            if not isinstance(code, str):
                return "Error: the python tool needs a string argument 'code'."
            return await self.python(code)
        return f"Error: unknown tool {name!r}; available tools: {', '.join(TOOL_NAMES)}."

    # -- accounting ------------------------------------------------------------------------
    async def memory_usage(self) -> dict[str, int]:
        """Bytes held for this episode: DuckDB's own account (``sql_bytes``), its database file
        (``sql_file_bytes``, in the SQL sandbox's tmpfs), the SQL worker's PSS and the Python
        worker's PSS."""
        await self.ready()
        sql = self._sql
        assert sql is not None
        async with self._sql_lock:
            usage = await sql.memory()
        usage["python_pss_bytes"] = self._worker.memory_pss() if self._worker else 0
        return usage


class SyncToolRuntime:
    """A :class:`ToolRuntime` driven from blocking code through a private event-loop thread.

    Args:
        config: The sandbox, limits and pool settings; :class:`ToolConfig` defaults by default.
    """

    def __init__(self, config: ToolConfig | None = None):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="causaltrace-tools", daemon=True
        )
        self._thread.start()
        self.runtime = ToolRuntime(config)
        try:
            self._run(self.runtime.start())
        except BaseException:
            self._stop()
            raise

    def run(self, coro: Any) -> Any:
        """Run a coroutine on this runtime's event loop and return its result (blocking).

        Args:
            coro: The coroutine.
        """
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    _run = run

    def episode(self, episode_dir: str | os.PathLike[str]) -> SyncEpisodeTools:
        """The blocking tools of one episode, loaded.

        Args:
            episode_dir: The episode's visible directory.
        """
        tools = self.runtime.episode(episode_dir)
        self._run(tools.start(wait=True))
        return SyncEpisodeTools(self, tools)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self.runtime.close())
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> SyncToolRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncEpisodeTools:
    """Blocking ``sql``/``python``/``call`` of one episode (see :class:`EpisodeTools`).

    Args:
        owner: The blocking runtime whose event loop runs the calls.
        tools: The episode's asynchronous tools.
        owns_runtime: Close ``owner`` when these tools are closed; off by default.
    """

    def __init__(self, owner: SyncToolRuntime, tools: EpisodeTools, owns_runtime: bool = False):
        self._owner = owner
        self.tools = tools
        self._owns_runtime = owns_runtime

    @property
    def tables(self) -> tuple[str, ...]:
        return self.tools.tables

    def sql(self, query: str) -> str:
        return self._owner._run(self.tools.sql(query))

    def python(self, code: str) -> str:
        return self._owner._run(self.tools.python(code))

    def call(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        return self._owner._run(self.tools.call(name, arguments))

    def close(self) -> None:
        if not self._owner._loop.is_closed():
            self._owner._run(self.tools.close())
        if self._owns_runtime:
            self._owner.close()

    def __enter__(self) -> SyncEpisodeTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_tools(
    episode_dir: str | os.PathLike[str], config: ToolConfig | None = None
) -> SyncEpisodeTools:
    """Blocking tools of one episode with a private runtime (scripts, notebooks, debugging).

    Args:
        episode_dir: The episode's visible directory.
        config: The tool settings; :class:`ToolConfig` defaults without warm workers by
            default.
    """
    config = config or ToolConfig(warm_workers=0)
    owner = SyncToolRuntime(config)
    try:
        tools = owner.runtime.episode(episode_dir)
        owner._run(tools.start(wait=True))
    except BaseException:
        owner.close()
        raise
    return SyncEpisodeTools(owner, tools, owns_runtime=True)
