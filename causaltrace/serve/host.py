"""Sessions of many episodes in one process, with back-pressure.

A GRPO step runs hundreds of rollouts at once; each needs its own tool session (namespace,
budget, transcript) but the rollouts of one prompt read the same episode's tables. The host
keeps one :class:`~causaltrace.env.DatasetSource` per dataset, one tool runtime (warm worker
pools) for all sessions, and refuses or delays new sessions when the machine is full instead of
letting it thrash: ``max_sessions`` bounds live sessions, and ``min_available_mb`` keeps that
much memory free (``MemAvailable`` from /proc/meminfo). A refused ``open`` raises
:class:`HostFull`, a named error a trainer can count and retry.

The HTTP server (:mod:`causaltrace.serve.http`) and its client (:mod:`causaltrace.serve.client`)
cannot import each other (each needs its own web library), so what they share lives here: the
bearer token's environment variable and default file, and :class:`OverCap`.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

from causaltrace.core.config import typed_config
from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.env.session import DiagnosisSession, EnvConfig
from causaltrace.errors import CausalTraceError
from causaltrace.tools import ToolConfig, ToolRuntime

# A session id a client chooses is a dict key and a URL segment, not a payload: no '/', no
# '..', nothing a path or a URL would read differently.
MAX_SESSION_ID_CHARS = 256
_SESSION_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.:-]{{0,{MAX_SESSION_ID_CHARS - 1}}}")


class HostFull(CausalTraceError):
    """No capacity for another session (live sessions at the limit, or too little memory)."""


class UnknownSession(CausalTraceError):
    """A session id this host does not hold (closed, expired, or never opened here)."""


class OverCap(CausalTraceError):
    """A session asked for more than the server allows (a budget above its cap: HTTP 422)."""


# The bearer token of ``causaltrace serve``: the server and its clients read it from this
# variable; a server without it generates one and writes it to a file only its user can read.
TOKEN_ENV = "CAUSALTRACE_SERVE_TOKEN"


def default_token_file(port: int) -> Path:
    """Where ``causaltrace serve`` on ``port`` writes a generated token, and where a client of a
    server on this machine looks for it: one file per port, so that two servers do not share a
    secret, in the user's cache directory (created mode 0700).

    Args:
        port: The server's port.
    """
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "causaltrace" / f"serve-{int(port)}.token"


@dataclass(frozen=True)
class HostConfig:
    """Capacity of one host. ``session_mb``: the memory one live session grows to (its Python
    and SQL workers with the tables loaded; measured by bench/bench_rollouts.py: about 27 MB
    with workers forked from the fork server, 96 MB with one cold sandbox per worker; None
    picks :data:`SESSION_MB_FORKED` or :data:`SESSION_MB_COLD` by the runtime's mode): the host
    admits at most ``(MemAvailable at start - min_available_mb) / session_mb`` sessions,
    because a session's memory arrives after ``open`` (when its tools load), so a burst of
    opens would all pass a check of the memory free at that moment. ``wait_seconds``: how long
    ``open`` waits for a free slot before raising :class:`HostFull` (0: refuse at once).
    ``idle_seconds``: sessions without calls for this long are closed (a trainer that crashed
    does not hold slots forever).

    Args:
        max_sessions: The most sessions open at once (at least 1); 256 by default.
        min_available_mb: Memory (MiB) to leave free; 1024 by default.
        session_mb: The memory one live session grows to (MiB); by the runtime's mode by
            default.
        wait_seconds: How long ``open`` waits for a slot; 0 (refuse at once) by default.
        idle_seconds: Close sessions idle this long; 900 by default.
        dataset_roots: Directories the datasets a client names must lie in (after symlinks
            are resolved); empty (the default): any directory holding a dataset. Set it where
            clients other than the trainer can reach the host.
    """

    max_sessions: int = 256
    min_available_mb: int = 1024
    session_mb: float | None = None
    wait_seconds: float = 0.0
    idle_seconds: float = 900.0
    dataset_roots: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise CausalTraceError(
                f"host config: max_sessions must be >= 1, not {self.max_sessions}"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> HostConfig:
        """A config from a mapping with this class's keys (``None`` gives the defaults).

        Args:
            data: The ``host`` section of a config, or ``None``.

        Raises:
            CausalTraceError: An unknown key, a value of the wrong type, or ``max_sessions`` < 1.
        """
        return typed_config(cls, data, "host config")


# Expected memory of a live session (MB), with margin over bench/bench_rollouts.py's figures
# (26.5 MB forked, 96 MB cold on ads_test; docs/serving.md): agent code that builds large
# frames grows a session past these, which the min_available_mb floor guards.
SESSION_MB_FORKED = 48.0
SESSION_MB_COLD = 160.0


def available_mb() -> float | None:
    """``MemAvailable`` in MiB (None where /proc/meminfo is not readable)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _result(step) -> dict[str, Any]:
    return asdict(step)


class SessionHost:
    """Hosts sessions in this process. Use ``async with SessionHost(...) as host``.

    Args:
        tool_config (ToolConfig | Mapping | None): The sandbox settings; the defaults by
            default.
        config: The host's capacity; :class:`HostConfig` defaults by default.
        env_config (EnvConfig | Mapping | None): The sessions' default budgets and reward;
            :class:`~causaltrace.env.EnvConfig` defaults by default.
    """

    def __init__(self, tool_config=None, config: HostConfig | None = None, env_config=None):
        self.tool_config = tool_config
        self.config = config or HostConfig()
        self.env_config = env_config
        self.runtime = None
        self.sources: dict[str, Any] = {}
        self.sessions: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.session_mb = self.config.session_mb or SESSION_MB_COLD  # set by start()
        self._slots: asyncio.Semaphore | None = None
        self.capacity = self.config.max_sessions
        self.refused = 0

    async def __aenter__(self) -> SessionHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> SessionHost:

        if self.runtime is None:
            config = self.tool_config
            if config is None or isinstance(config, Mapping):
                config = ToolConfig.from_mapping(config)
            self.runtime = ToolRuntime(config)
            await self.runtime.start()
            self.capacity = self.config.max_sessions
            free = available_mb()
            self.session_mb = self.config.session_mb or (
                SESSION_MB_FORKED if self.runtime.forking else SESSION_MB_COLD
            )
            if free is not None:
                fits = int((free - self.config.min_available_mb) // self.session_mb)
                self.capacity = max(0, min(self.capacity, fits))
            self._slots = asyncio.Semaphore(self.capacity) if self.capacity else None
        return self

    async def close(self) -> None:
        for sid in list(self.sessions):
            await self.close_session(sid)
        if self.runtime is not None:
            await self.runtime.close()
            self.runtime = None

    def source(self, dataset: str):
        """The dataset at ``dataset`` (opened once), if it lies in the configured roots.

        Raises:
            CausalTraceError: The path is outside every ``dataset_roots`` directory.
        """
        roots = self.config.dataset_roots
        where = Path(dataset).resolve() if roots else None
        if roots and not any(where.is_relative_to(Path(root).resolve()) for root in roots):
            raise CausalTraceError(
                f"dataset {dataset!r} is outside the host's dataset roots {list(roots)}"
            )
        if dataset not in self.sources:
            self.sources[dataset] = DatasetSource(dataset)
        return self.sources[dataset]

    async def open(
        self,
        dataset: str,
        episode: str,
        env_config: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Open a session; returns ``{"session_id", "prompt", "tools"}``. Raises
        :class:`HostFull` when there is no capacity within ``wait_seconds``.

        Args:
            dataset: The dataset directory (on the host's machine).
            episode: The episode id.
            env_config: Budgets and reward of this session (:class:`~causaltrace.env.EnvConfig`
                keys); the host's by default.
            session_id: The id to give the session; a fresh one by default.

        Raises:
            HostFull: No capacity within ``wait_seconds``.
        """

        await self.start()
        await self.expire_idle()
        if session_id is not None and not _SESSION_ID.fullmatch(str(session_id)):
            raise CausalTraceError(
                f"session id {session_id!r} is not valid: 1-{MAX_SESSION_ID_CHARS} letters, "
                "digits, '_', '-', '.' or ':', starting with a letter or digit"
            )
        if session_id is not None and session_id in self.sessions:
            raise CausalTraceError(f"session {session_id!r} is already open")
        await self._acquire()
        try:
            source = self.source(str(dataset))
            env = env_config if env_config is not None else self.env_config
            if env is None or isinstance(env, Mapping):
                env = EnvConfig.from_mapping(env)
            session = DiagnosisSession(self.runtime, source, str(episode), env)
            await session.__aenter__()
        except BaseException:
            if self._slots is not None:
                self._slots.release()
            raise
        sid = session_id or uuid4().hex
        self.sessions[sid] = session
        self._locks[sid] = asyncio.Lock()
        self._last[sid] = time.monotonic()
        return {
            "session_id": sid,
            "prompt": session.prompt,
            "tools": ToolContract.for_dataset(source).openai(),
        }

    async def _acquire(self) -> None:
        if self._slots is None:
            self.refused += 1
            raise HostFull(
                f"no memory for any session: MemAvailable at start left less than one "
                f"session_mb={self.session_mb:g} above min_available_mb="
                f"{self.config.min_available_mb}"
            )
        free = available_mb()
        if free is not None and free < self.config.min_available_mb:
            self.refused += 1
            raise HostFull(
                f"only {free:.0f} MiB of memory available (min_available_mb="
                f"{self.config.min_available_mb}); {len(self.sessions)} sessions are live"
            )
        try:
            if self.config.wait_seconds > 0:
                await asyncio.wait_for(self._slots.acquire(), self.config.wait_seconds)
            elif self._slots.locked():
                raise TimeoutError
            else:
                await self._slots.acquire()
        except TimeoutError:
            self.refused += 1
            raise HostFull(
                f"{len(self.sessions)} sessions are live (capacity {self.capacity}: "
                f"max_sessions={self.config.max_sessions}, memory for "
                f"session_mb={self.session_mb:g} each); none freed within "
                f"{self.config.wait_seconds:g} s"
            ) from None

    def _get(self, sid: str):
        session = self.sessions.get(sid)
        if session is None:
            raise UnknownSession(f"no open session {sid!r} on this host")
        self._last[sid] = time.monotonic()
        return session

    async def step(self, sid: str, action: Any) -> dict[str, Any]:
        """One tool call; returns the :class:`~causaltrace.env.StepResult` as a dict.

        Args:
            sid: The session id ``open`` returned.
            action: The tool call (see :meth:`~causaltrace.env.session.ToolCall.of`).

        Raises:
            UnknownSession: The host holds no such session.
        """
        session = self._get(sid)
        async with self._locks[sid]:
            try:
                return _result(await session.step(action))
            finally:
                self._last[sid] = time.monotonic()  # idle time counts from a call's end

    async def turn(
        self, sid: str, calls: Sequence[Any], content: str | None = None
    ) -> list[dict[str, Any]]:
        """One assistant message with its tool calls (none: a final text answer).

        Args:
            sid: The session id ``open`` returned.
            calls: The message's tool calls.
            content: The message's text; none by default.

        Raises:
            UnknownSession: The host holds no such session.
        """
        session = self._get(sid)
        async with self._locks[sid]:
            try:
                return [_result(r) for r in await session.turn(list(calls), content)]
            finally:
                self._last[sid] = time.monotonic()

    async def close_session(self, sid: str) -> dict[str, Any]:
        """Close a session; returns its transcript (messages, events, result).

        Args:
            sid: The session id ``open`` returned.

        Raises:
            UnknownSession: The host holds no such session.
        """
        session = self.sessions.pop(sid, None)
        if session is None:
            raise UnknownSession(f"no open session {sid!r} on this host")
        self._last.pop(sid, None)
        lock = self._locks.pop(sid)
        try:
            async with lock:
                await session.close()
                return session.transcript()
        finally:
            if self._slots is not None:
                self._slots.release()

    async def expire_idle(self) -> int:
        now = time.monotonic()
        stale = [
            s
            for s, t in self._last.items()
            if now - t > self.config.idle_seconds and not self._locks[s].locked()  # not mid-call
        ]
        for sid in stale:
            await self.close_session(sid)
        return len(stale)

    def health(self) -> dict[str, Any]:
        return {
            "sessions": len(self.sessions),
            "max_sessions": self.config.max_sessions,
            "capacity": self.capacity,
            "available_mb": available_mb(),
            "min_available_mb": self.config.min_available_mb,
            "refused": self.refused,
            "sandbox": None if self.runtime is None else self.runtime.sandbox,
        }
