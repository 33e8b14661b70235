"""verl tools: ``sql``, ``python`` and ``submit`` as ``verl.tools.base_tool.BaseTool``
subclasses (verl 0.7 to 0.9; tested with 0.9.1). Importable without verl; constructing a tool
without it raises a named error.

verl's ``ToolAgentLoop`` calls ``create`` -> ``execute`` -> ``release`` around every single tool
call, with the row's ``create_kwargs`` (the same for every GRPO sample of a prompt). The state
of a sample (its tools' DuckDB connection and Python namespace, its call budget, whether it
submitted) therefore lives in a :class:`DiagnosisSession` keyed by the *trajectory*: verl >= 0.7
passes each trajectory's ``agent_data`` to ``execute``, and that object is the key (held weakly:
when verl drops it at the end of the trajectory, its session closes). Samples of one prompt
never share a namespace or a budget. A caller other than verl's agent loop may give
``create_kwargs={"episode_id": ..., "rollout_key": ...}`` instead.

A session ends on ``submit``, when its budget is spent (later calls answer "The episode is
over."), when its trajectory is dropped, or after ``idle_seconds`` without calls. The reward
comes from ``causaltrace.training.verl_reward.compute_score`` on the whole response; ``submit``
only acknowledges. The tool config is rendered from the tool contract:
``causaltrace-export verl-tools --dataset DIR --out tools.yaml``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from causaltrace.env.session import host_failure
from causaltrace.errors import CausalTraceError
from causaltrace.serve import HostConfig, SessionHost, UnknownSession

_LOG = logging.getLogger(__name__)

SUPPORTED = ((0, 7), (0, 9))  # inclusive range of verl minor versions

try:  # verl is optional: the module imports without it, the tools refuse to start
    import verl as _verl
    from verl.tools.base_tool import BaseTool as _BaseTool
    from verl.tools.schemas import ToolResponse
except ImportError:  # pragma: no cover - exercised where verl is absent
    _verl = None
    _BaseTool = object
    ToolResponse = None


def _check_verl() -> None:
    if _verl is None:
        raise CausalTraceError(
            "causaltrace.training.verl_tools needs verl (pip install 'causaltrace[verl]'; verl 0.7-0.9)"
        )
    parts = tuple(int(p) for p in _verl.__version__.split(".")[:2] if p.isdigit())
    if not SUPPORTED[0] <= parts <= SUPPORTED[1]:
        raise CausalTraceError(
            f"verl {_verl.__version__} is not supported by causaltrace's verl tools (verl "
            f"{SUPPORTED[0][0]}.{SUPPORTED[0][1]} to {SUPPORTED[1][0]}.{SUPPORTED[1][1]}): "
            "older versions do not pass the trajectory to execute(), so GRPO samples of one "
            "prompt could not be kept apart"
        )


@dataclass
class _Open:
    """One trajectory's session on the host."""

    session_id: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last: float = field(default_factory=time.monotonic)
    done: bool = False


def make_host(config: dict) -> Any:
    """The host the tools' sessions run on: ``config["host"]`` is absent (a
    :class:`~causaltrace.serve.SessionHost` in this process, with ``config["tools"]`` as its
    ToolConfig) or ``{"factory": "module:callable", "kwargs": {...}}`` (for example
    ``causaltrace.serve.client:HttpHost`` with ``base_url``, or
    ``causaltrace.serve.ray_host:RayHost``), so rollouts can run on other machines.

    Args:
        config: The tool config (``host`` and ``tools`` are read).

    Raises:
        CausalTraceError: ``host.factory`` is not ``module:callable``.
    """
    spec = config.get("host")
    if not spec:
        return SessionHost(config.get("tools"), HostConfig(max_sessions=1_000_000))

    factory = str(spec.get("factory", ""))
    module, sep, name = factory.partition(":")
    if not sep:
        raise CausalTraceError(f"tool config host.factory is 'module:callable', not {factory!r}")
    return getattr(importlib.import_module(module), name)(**dict(spec.get("kwargs") or {}))


class SessionRegistry:
    """The open sessions of this process, by trajectory key (shared by the three tools)."""

    def __init__(self) -> None:
        self.host = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.sessions: dict[str, _Open] = {}
        self.closed: dict[str, str] = {}  # key -> why it ended (calls after the end say so)
        self._keys: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock: asyncio.Lock | None = None
        self.closing: set[asyncio.Task] = set()  # closes scheduled by dropped trajectories

    def key_for(self, agent_data: Any, create_kwargs: dict[str, Any]) -> str:
        """The trajectory key: an explicit ``rollout_key``, else one per ``agent_data`` object.

        Args:
            agent_data (Any): verl's trajectory object (``None`` if verl did not pass it).
            create_kwargs: The tool instance's ``create_kwargs``: ``episode_id`` and optionally
                ``rollout_key``.

        Raises:
            CausalTraceError: Neither ``agent_data`` nor a ``rollout_key`` is given.
        """
        explicit = create_kwargs.get("rollout_key")
        episode = create_kwargs["episode_id"]
        if explicit is not None:
            return f"{episode}::{explicit}"
        if agent_data is None:
            raise CausalTraceError(
                "causaltrace verl tools need the trajectory (verl >= 0.7 passes agent_data to "
                "execute) or create_kwargs['rollout_key'] to keep GRPO samples apart"
            )
        key = self._keys.get(agent_data)
        if key is None:
            key = self._keys[agent_data] = f"{episode}::{uuid4().hex}"
            loop = asyncio.get_running_loop()
            weakref.finalize(agent_data, _close_later, self, loop, key)
        return key

    async def _ensure_host(self, config: dict) -> None:
        loop = asyncio.get_running_loop()
        if self.host is not None and self.loop is not loop:
            # A new event loop (verl restarts its loop between phases): the old host's
            # processes belong to a dead loop; start afresh.
            self.host, self.sessions = None, {}
        if self.host is None:
            host = make_host(config)
            if hasattr(host, "start"):
                await host.start()
            self.host, self.loop = host, loop

    async def open(self, config: dict, key: str, episode: str) -> _Open | None:
        """The trajectory's open session, started on first use; None once it has ended.

        Args:
            config: The tool config (``dataset``, ``max_tool_calls``, ``idle_seconds``, ``host``,
                ``tools``).
            key: The trajectory key from :meth:`key_for`.
            episode: The episode id to open.
        """
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if key in self.closed:
                return None
            await self._ensure_host(config)
            entry = self.sessions.get(key)
            if entry is None:
                env = {
                    "max_tool_calls": int(config.get("max_tool_calls", 30)),
                    "max_turns": 10**9,  # verl counts turns itself (multi_turn.max_*_turns)
                }
                if config.get("retry_malformed_submit"):
                    env["reward"] = {"parse": {"retry_malformed_submit": True}}
                opened = await self.host.open(str(config["dataset"]), episode, env)
                entry = self.sessions[key] = _Open(opened["session_id"])
            entry.last = time.monotonic()
        await self.evict_idle(float(config.get("idle_seconds", 600)))
        return entry

    async def end(self, key: str, reason: str) -> None:
        entry = self.sessions.pop(key, None)
        self.closed[key] = reason
        if len(self.closed) > 100_000:  # bounded memory of ended keys
            for old in list(self.closed)[:50_000]:
                del self.closed[old]
        if entry is not None and self.host is not None:
            with contextlib.suppress(UnknownSession):  # the host expired it already
                await self.host.close_session(entry.session_id)

    async def evict_idle(self, idle: float) -> None:
        now = time.monotonic()
        for key in [k for k, e in self.sessions.items() if now - e.last > idle]:
            await self.end(key, f"idle for more than {idle:g} s")

    async def aclose(self) -> None:
        """Close every session and the tool runtime (tests; verl's worker exits otherwise)."""
        await asyncio.gather(*self.closing, return_exceptions=True)
        for key in list(self.sessions):
            await self.end(key, "closed")
        if self.host is not None and hasattr(self.host, "close"):
            await self.host.close()
        self.host, self.loop = None, None
        self.closed.clear()


def _close_later(registry: SessionRegistry, loop: asyncio.AbstractEventLoop, key: str) -> None:
    """A trajectory was dropped by verl: close its session on its loop (if still running)."""
    if key not in registry.sessions or loop.is_closed():
        return

    def start() -> None:
        task = loop.create_task(registry.end(key, "trajectory finished"))
        registry.closing.add(task)
        task.add_done_callback(registry.closing.discard)

    with contextlib.suppress(RuntimeError):  # the loop stopped meanwhile
        loop.call_soon_threadsafe(start)


REGISTRY = SessionRegistry()


class CausalTraceTool(_BaseTool):
    """Base of the three tools. ``config``: ``dataset`` (required), ``max_tool_calls`` (per
    trajectory, default 30), ``idle_seconds`` (default 600), ``tools`` (ToolConfig fields),
    ``host`` (where sessions run; see :func:`make_host`).

    Args:
        config: The tool config, as above.
        tool_schema (Any): The tool's OpenAI function schema, as verl gives it.

    Raises:
        CausalTraceError: ``config`` has no ``dataset``.
    """

    def __init__(self, config: dict, tool_schema: Any):
        _check_verl()
        if "dataset" not in (config or {}):
            raise CausalTraceError(f"{type(self).__name__}: the tool config needs 'dataset'")
        super().__init__(config, tool_schema)
        self._instances: dict[str, dict[str, Any]] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any):
        """Remember the call's ``create_kwargs`` (the episode); returns ``(id, ToolResponse)``.

        Args:
            instance_id: The instance's id; a fresh one by default.
            **kwargs: verl's keyword arguments; ``create_kwargs`` must hold ``episode_id``.

        Raises:
            CausalTraceError: ``create_kwargs`` has no ``episode_id``.
        """
        create_kwargs = dict(kwargs.get("create_kwargs") or {})
        if create_kwargs.get("episode_id") is None:
            raise CausalTraceError(
                "causaltrace tools need create_kwargs={'episode_id': ...} (the verl dataset's "
                "extra_info.tools_kwargs; written by causaltrace-export rl --format verl)"
            )
        instance_id = instance_id or uuid4().hex
        self._instances[instance_id] = create_kwargs
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any):
        """Run the call in the trajectory's session; returns ``(ToolResponse, 0.0, metrics)``.

        Args:
            instance_id: The instance from :meth:`create`.
            parameters: The call's arguments.
            **kwargs: verl's keyword arguments; ``agent_data`` (the trajectory) keys the session.
        """
        create_kwargs = self._instances.get(instance_id)
        if create_kwargs is None:
            return ToolResponse(text="Error: unknown tool instance."), 0.0, {}
        key = REGISTRY.key_for(kwargs.get("agent_data"), create_kwargs)
        entry = await REGISTRY.open(self.config, key, str(create_kwargs["episode_id"]))
        if entry is None:
            return ToolResponse(text="The episode is over."), 0.0, {}
        async with entry.lock:
            if entry.done:
                return ToolResponse(text="The episode is over."), 0.0, {}
            call = {"name": self.name, "arguments": dict(parameters)}
            try:
                result = await REGISTRY.host.step(entry.session_id, call)
            except Exception as exc:  # verl would fail the whole rollout step on a raise
                _LOG.warning("the %s call failed in the environment", self.name, exc_info=True)
                return ToolResponse(text=host_failure(self.name, exc)), 0.0, {}
            entry.done = bool(result["terminated"] or result["truncated"])
        metrics = {"tool_calls": result["info"].get("tool_calls", 0)}
        if entry.done:
            await REGISTRY.end(key, result["info"].get("reason", "done"))
        return ToolResponse(text=result["observation"]), 0.0, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0  # the reward is computed from the whole response by compute_score

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)


class VerlSqlTool(CausalTraceTool):
    """The ``sql`` tool."""


class VerlPythonTool(CausalTraceTool):
    """The ``python`` tool."""


class VerlSubmitTool(CausalTraceTool):
    """The ``submit`` tool: ends the trajectory's session; compute_score reads the call from
    the response."""
