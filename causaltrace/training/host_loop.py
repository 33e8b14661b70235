"""An event-loop thread for the trainer adapters whose callers are not the hosts' loop.

Hosts (:class:`~causaltrace.serve.SessionHost` and its remote forms) are asyncio. A trainer may
call an environment from blocking code (SkyRL calls ``env.step`` from its generator's loop or
from a thread pool) or from an event loop of its own, perhaps a new one per training step (an
ART script's ``asyncio.run``). A host started on one loop cannot be used from another, so
these adapters run every host call on one private loop thread per process: :meth:`HostLoop.run`
from blocking code, ``await`` :meth:`HostLoop.call` from any other loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ClassVar

from causaltrace.serve import HostConfig, SessionHost


class HostLoop:
    """One event-loop thread per process on which host calls run; get it with :meth:`get`."""

    _lock = threading.Lock()
    _loops: ClassVar[dict[int, HostLoop]] = {}

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(
            target=self.loop.run_forever, name="causaltrace-host-loop", daemon=True
        ).start()
        self.hosts: dict[Any, Any] = {}

    @classmethod
    def get(cls) -> HostLoop:
        """This process's loop (a forked child gets its own)."""
        with cls._lock:
            key = os.getpid()
            if key not in cls._loops:
                cls._loops[key] = cls()
            return cls._loops[key]

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the loop and wait for its result (blocking; any other thread).

        Raises:
            RuntimeError: Called from the loop's own thread (it would wait on itself).
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError("HostLoop.run() called on its own event loop")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the loop and await its result from another loop."""
        if asyncio.get_running_loop() is self.loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def host(self, key: Any, make: Callable[[], Any]) -> Any:
        """The process's host for ``key``, made (and started, on this loop) on first use."""
        with self._lock:
            if key not in self.hosts:
                host = make()
                if hasattr(host, "start"):
                    self.run(host.start())
                self.hosts[key] = host
            return self.hosts[key]

    def close_hosts(self) -> None:
        """Close every host made here (and their open sessions); the next use makes new ones."""
        with self._lock:
            hosts, self.hosts = self.hosts, {}
        for host in hosts.values():
            if hasattr(host, "close"):
                self.run(host.close())

    def local_host(self, tool_config: Any = None) -> SessionHost:
        """The process's in-process :class:`SessionHost` for a sandbox config (one per distinct
        config; the trainer sizes its batch, so the host only guards memory).

        Args:
            tool_config (ToolConfig | Mapping | None): The sandbox settings; the defaults by
                default.
        """
        return self.host(
            ("local", _config_key(tool_config)),
            lambda: SessionHost(tool_config, HostConfig(max_sessions=1_000_000)),
        )


def _config_key(config: Any) -> str:
    """A key equal for equal configs (a mapping, a dataclass, or None)."""
    if config is None:
        return ""
    if isinstance(config, Mapping):
        return json.dumps(dict(config), sort_keys=True, default=str)
    return repr(config)
