"""Keeping a fork server running: start it, and start it again (bounded, with backoff) if it dies.

A fork server (``forking.py``) is one process for all of a tool's workers. If it dies (killed,
out of memory), every worker it forked dies with it, and until another one runs each new worker
is a cold sandbox (about four times the memory and a second of CPU). A :class:`ForkServerKeeper`
watches its server and, when it stops while the runtime is still open, starts a new one after a
short delay that doubles with each restart in the last :data:`RESTART_WINDOW` seconds; after
:data:`RESTART_LIMIT` restarts in that window (a server that keeps dying) it gives up and the
launcher stays on cold sandboxes, which work everywhere. While no server runs,
``launcher.fork_server`` is None, so :attr:`running` (and ``ToolRuntime.forking``) tell the
truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("causaltrace.tools")

# The first restart waits FIRST_DELAY seconds; each further restart within RESTART_WINDOW
# seconds waits twice as long as the one before, at most MAX_DELAY; the (RESTART_LIMIT + 1)-th
# death within the window is not followed by a restart.
FIRST_DELAY = 0.5
MAX_DELAY = 30.0
RESTART_WINDOW = 600.0
RESTART_LIMIT = 5


class ForkServerKeeper:
    """Owns one launcher's fork server: the first start, the watch, the restarts, the close.

    ``start_server`` starts a server, makes it the launcher's (``launcher.fork_server``) and
    returns it once a worker forked from it has started; it raises (:class:`SandboxError`,
    :class:`SandboxUnavailableError`) if the server cannot serve, leaving no server behind.
    ``on_restart`` is called after each successful restart (the pools then drop the idle
    workers that died with the old server and refill from the new one).
    """

    def __init__(
        self,
        launcher: Any,
        start_server: Callable[[], Awaitable[Any]],
        on_restart: Callable[[], None] | None = None,
        *,
        first_delay: float = FIRST_DELAY,
        max_delay: float = MAX_DELAY,
        window: float = RESTART_WINDOW,
        limit: int = RESTART_LIMIT,
    ):
        self.launcher = launcher
        self._start_server = start_server
        self._on_restart = on_restart
        self.first_delay, self.max_delay = first_delay, max_delay
        self.window, self.limit = window, limit
        self.server: Any = None
        self.restarts = 0
        self.gave_up = False
        self._recent: deque[float] = deque()  # when each restart in the window was attempted
        self._closed = False
        self._watch: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether workers are forked from a live server right now."""
        server = self.server
        return server is not None and server.alive and self.launcher.fork_server is server

    async def start(self) -> None:
        """Start the first server (raising if it cannot serve), then watch it."""
        self.server = await self._start_once()
        self._watch = asyncio.get_running_loop().create_task(self._keep())

    async def _start_once(self) -> Any:
        server = await self._start_server()
        self.launcher.fork_server = server
        return server

    def next_delay(self) -> float | None:
        """Seconds to wait before the next restart, or None once the limit is reached."""
        now = time.monotonic()
        while self._recent and now - self._recent[0] > self.window:
            self._recent.popleft()
        if len(self._recent) >= self.limit:
            return None
        return min(self.max_delay, self.first_delay * 2 ** len(self._recent))

    async def _keep(self) -> None:
        """Wait for the server to stop; restart it until the runtime closes or restarts run out."""
        while not self._closed:
            server = self.server
            await server.wait_stopped()
            if self._closed:
                return
            if self.launcher.fork_server is server:
                self.launcher.fork_server = None
            log.warning(
                "causaltrace.tools: the %s fork server stopped (%s)",
                self.launcher.name,
                server.stderr_tail(),
            )
            await server.close()
            replacement = await self._restart()
            if replacement is None:
                return
            self.server = replacement

    async def _restart(self) -> Any:
        """A new server, after the backoff delay; None when giving up (or closing)."""
        while not self._closed:
            delay = self.next_delay()
            if delay is None:
                self.gave_up = True
                log.error(
                    "causaltrace.tools: the %s fork server stopped %d times in %.0f s; not "
                    "restarting it: each worker now starts a sandbox of its own",
                    self.launcher.name,
                    self.limit,
                    self.window,
                )
                return None
            await asyncio.sleep(delay)
            self._recent.append(time.monotonic())
            try:
                server = await self._start_once()
            except Exception as exc:  # counted against the limit like a death
                log.warning("causaltrace.tools: restarting the fork server failed: %s", exc)
                continue
            self.restarts += 1
            log.warning("causaltrace.tools: the %s fork server was restarted", self.launcher.name)
            if self._on_restart is not None:
                self._on_restart()
            return server
        return None

    async def close(self) -> None:
        """Stop watching and stop the server (its workers end with it)."""
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(BaseException):
                await self._watch
        server, self.server = self.server, None
        if self.launcher.fork_server is server:
            self.launcher.fork_server = None
        if server is not None:
            await server.close()
