"""An OpenEnv server and client for a dataset's episodes (``openenv-core`` 0.3; import name
``openenv``).

    # server: uvicorn "causaltrace.serve.openenv_env:app_from_env" --factory --port 8000
    #         (CAUSALTRACE_OPENENV_DATASET=data/ads_test, CAUSALTRACE_SERVE_TOKEN=...), or:
    app = create_causaltrace_app("data/ads_test", token=token)

    # client (OpenEnv's EnvClient: one WebSocket connection is one session on the server)
    async with CausalTraceClient(base_url="http://localhost:8000", token=token) as env:
        result = await env.reset(episode_id="test-000012")      # or seed=12
        result = await env.step(CausalTraceAction(name="sql", arguments={"query": "SHOW TABLES"}))
        result = await env.step(CausalTraceAction(name="submit", arguments={"root_cause": ...}))
        result.reward, result.done                              # the composite reward, True

The adapter is thin: a session is a :class:`~causaltrace.env.DiagnosisSession` opened on a
:class:`~causaltrace.serve.SessionHost` (the one behind ``causaltrace serve``, TRL's and verl's
adapters), so tools, budgets, rewards and transcripts are the environment's own and the tool
schemas are :class:`~causaltrace.env.contract.ToolContract`'s. The host runs on its own
event-loop thread (:class:`CausalTraceBackend`), so OpenEnv may call the environment from its
server loop (``reset_async``/``step_async``) or from its per-session executor threads
(``reset``/``step``) alike.

What crosses the wire: :class:`CausalTraceObservation` (the text the agent reads, the episode
id, the tool schemas on reset, the counts, and when the episode ends the reward and its
breakdown) and :class:`CausalTraceState` (ids, counts, budgets). Labels stay on the host: no
field holds one, and OpenEnv drops ``metadata`` from observations on the wire.

OpenEnv's HTTP ``/reset`` and ``/step`` endpoints make a fresh environment per request (they
are stateless by OpenEnv's design); an episode runs over the WebSocket (``/ws``), which is what
``EnvClient`` uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import (
    Action,
    ConcurrencyConfig,
    EnvironmentMetadata,
    Observation,
    State,
)
from pydantic import Field
from websockets.asyncio.client import connect as ws_connect

from causaltrace.core.version import __version__
from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.session import EnvConfig
from causaltrace.errors import CausalTraceError
from causaltrace.serve.host import TOKEN_ENV, HostConfig, SessionHost, UnknownSession
from causaltrace.serve.http import TokenGuard

if TYPE_CHECKING:
    from fastapi import FastAPI

DATASET_ENV = "CAUSALTRACE_OPENENV_DATASET"
INSECURE_ENV = "CAUSALTRACE_OPENENV_INSECURE"
# OpenEnv closes a session idle this long: 64 abandoned /mcp sessions held every slot of an app
# with no timeout (issue 42).
IDLE_SECONDS = 600.0


class CausalTraceAction(Action):
    """One tool call: the tool's name and its arguments (a mapping, or JSON text)."""

    name: str = Field(..., description="The tool: sql, python or submit.")
    arguments: dict[str, Any] | str = Field(
        default_factory=dict,
        description='The arguments: {"query"} (sql), {"code"} (python), '
        '{"root_cause", "slice"} (submit); a mapping or JSON text.',
    )


class CausalTraceObservation(Observation):
    """What a reset or a step returns (``done`` and ``reward`` are OpenEnv's own fields)."""

    text: str = Field(default="", description="What the agent reads: the prompt, a tool output.")
    episode_id: str | None = Field(default=None, description="The dataset's episode id.")
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="The tool schemas (OpenAI format), on reset."
    )
    tool_calls: int = Field(default=0, description="Tool calls made (the budget's count).")
    turns: int = Field(default=0, description="Turns taken (the budget's count).")
    truncated: bool = Field(default=False, description="The episode ended without an answer.")
    reward_breakdown: dict[str, float] = Field(
        default_factory=dict,
        description="The reward's terms, when the episode is over (for the trainer's logs).",
    )


class CausalTraceState(State):
    """The session's state (never its label)."""

    session_id: str | None = Field(default=None, description="The host's session id.")
    dataset: str | None = Field(default=None, description="The dataset's directory name.")
    tool_calls: int = 0
    turns: int = 0
    max_tool_calls: int | None = None
    max_turns: int | None = None
    done: bool = False


class CausalTraceBackend:
    """The sessions behind one app: a :class:`SessionHost` on a private event-loop thread.

    Args:
        dataset: The dataset directory.
        env_config (EnvConfig | Mapping | None): Budgets, reward and transcripts of every
            session; the :class:`~causaltrace.env.EnvConfig` defaults by default.
        tool_config (ToolConfig | Mapping | None): The sandbox settings; the defaults by default.
        host_config: The host's capacity; :class:`HostConfig` defaults by default.
        cache_dir: Where a lazy split's rebuilt episodes go; the dataset's own by default.

    Raises:
        CausalTraceError: ``dataset`` is not a generated dataset.
    """

    def __init__(
        self,
        dataset: str | os.PathLike,
        *,
        env_config: EnvConfig | Mapping[str, Any] | None = None,
        tool_config=None,
        host_config: HostConfig | None = None,
        cache_dir: str | os.PathLike | None = None,
    ):
        self.dataset = str(dataset)
        env = (
            env_config if isinstance(env_config, EnvConfig) else EnvConfig.from_mapping(env_config)
        )
        self.env_config = env
        self.host = SessionHost(tool_config, host_config, env)
        self.source = self.host.sources.setdefault(
            self.dataset, DatasetSource(self.dataset, cache_dir)
        )
        self.episode_ids = self.source.episode_ids
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="causaltrace-openenv", daemon=True
                )
                self._thread.start()
            return self._loop

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the host's loop and wait for it (blocking; any other thread)."""
        loop = self._ensure_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("CausalTraceBackend.run() called on its own event loop")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    async def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the host's loop and await it from another loop."""
        loop = self._ensure_loop()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def close(self) -> None:
        """Close every session and the host, and stop the loop (idempotent)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.host.close(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join()
            loop.close()


class CausalTraceEnvironment(
    Environment[CausalTraceAction, CausalTraceObservation, CausalTraceState]
):
    """One OpenEnv session: at most one open episode of the backend's dataset at a time.

    ``reset(episode_id=id)`` opens that episode; ``reset(seed=s)`` episode ``s mod n`` (as
    :class:`~causaltrace.env.gym.DiagnosisEnv`); a plain ``reset()`` one drawn from this
    environment's generator (seeded by the last seed given). The episode's host session closes
    when it ends (its transcript is written if ``env_config.transcript_dir`` is set), on the next
    reset, and on :meth:`close`.

    Args:
        backend: The host the sessions run on (one per app).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance has its own host session

    def __init__(self, backend: CausalTraceBackend):
        super().__init__()
        self.backend = backend
        self._sid: str | None = None
        self._state = CausalTraceState(dataset=Path(backend.dataset).name)
        self._rng = np.random.default_rng()

    # -- the episode, on the backend's loop ---------------------------------------------------
    async def _open(self, seed: int | None, episode_id: str | None) -> CausalTraceObservation:
        await self._end()
        if episode_id is None:
            ids = self.backend.episode_ids
            if seed is not None:
                self._rng = np.random.default_rng(seed)
            index = seed if seed is not None else int(self._rng.integers(len(ids)))
            episode_id = ids[index % len(ids)]
        opened = await self.backend.host.open(self.backend.dataset, str(episode_id))
        self._sid = opened["session_id"]
        config = self.backend.env_config
        self._state = CausalTraceState(
            episode_id=str(episode_id),
            session_id=self._sid,
            dataset=Path(self.backend.dataset).name,
            max_tool_calls=config.max_tool_calls,
            max_turns=config.max_turns,
        )
        return CausalTraceObservation(
            text=opened["prompt"], episode_id=str(episode_id), tools=opened["tools"]
        )

    async def _step(self, action: CausalTraceAction) -> CausalTraceObservation:
        if self._sid is None:
            raise RuntimeError(
                "no open episode: call reset() first"
                + (" (this one is over)" if self._state.done else "")
            )
        call = {"name": action.name, "arguments": action.arguments}
        result = await self.backend.host.step(self._sid, call)
        info = result["info"]
        done = bool(result["terminated"] or result["truncated"])
        state = self._state
        state.step_count += 1
        state.tool_calls, state.turns, state.done = info["tool_calls"], info["turns"], done
        if done:
            await self._end()
        return CausalTraceObservation(
            text=result["observation"],
            episode_id=state.episode_id,
            tool_calls=state.tool_calls,
            turns=state.turns,
            truncated=bool(result["truncated"]),
            done=done,
            reward=float(result["reward"]),
            reward_breakdown=dict(info.get("reward") or {}) if done else {},
            metadata={"reason": info.get("reason")} if done else {},
        )

    async def _end(self) -> None:
        sid, self._sid = self._sid, None
        if sid is not None:
            with contextlib.suppress(UnknownSession):  # expired on the host (idle_seconds)
                await self.backend.host.close_session(sid)

    # -- OpenEnv's interface -----------------------------------------------------------------
    def reset(
        self, seed: int | None = None, episode_id: str | None = None
    ) -> CausalTraceObservation:
        """Open an episode (closing the previous one).

        Args:
            seed: Picks episode ``seed % n`` (and seeds this environment's generator).
            episode_id: Picks the dataset's episode by id (wins over ``seed``).
        """
        return self.backend.run(self._open(seed, episode_id))

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None
    ) -> CausalTraceObservation:
        return await self.backend.call(self._open(seed, episode_id))

    def step(
        self, action: CausalTraceAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CausalTraceObservation:
        """One tool call (the tools' own time limits apply; ``timeout_s`` is not used).

        Args:
            action: The tool call.
            timeout_s: Ignored.
            **kwargs: Ignored.

        Raises:
            RuntimeError: No episode is open.
        """
        return self.backend.run(self._step(_action(action)))

    async def step_async(
        self, action: CausalTraceAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CausalTraceObservation:
        return await self.backend.call(self._step(_action(action)))

    @property
    def state(self) -> CausalTraceState:
        return self._state.model_copy()

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="causaltrace",
            description=(
                f"Root-cause diagnosis episodes of {Path(self.backend.dataset).name}: "
                "investigate with the sql and python tools, then submit."
            ),
            version=__version__,
        )

    def close(self) -> None:
        if self._sid is not None:
            self.backend.run(self._end())


def _action(action: Any) -> CausalTraceAction:
    if isinstance(action, CausalTraceAction):
        return action
    if isinstance(action, Mapping):
        return CausalTraceAction.model_validate(dict(action))
    raise TypeError(f"an action is a CausalTraceAction (name, arguments), not {action!r}")


def create_causaltrace_app(
    dataset: str | os.PathLike,
    *,
    token: str | None = None,
    insecure: bool = False,
    env_config: EnvConfig | Mapping[str, Any] | None = None,
    tool_config=None,
    host_config: HostConfig | None = None,
    cache_dir: str | os.PathLike | None = None,
    max_concurrent_envs: int = 64,
    session_timeout: float | None = IDLE_SECONDS,
) -> FastAPI:
    """OpenEnv's FastAPI app (``openenv.core.env_server.create_app``) over a dataset.

    Every route but ``GET /health`` and every WebSocket handshake must carry ``Authorization:
    Bearer <token>`` (:class:`~causaltrace.serve.http.TokenGuard`: a 401, or the handshake closed
    before a session exists): anyone who could reach an open app could play episodes and read
    their rewards, and so try causes until one scores. :class:`CausalTraceClient` sends it.

    Args:
        dataset: The dataset directory.
        token: The bearer token (e.g. ``secrets.token_urlsafe(32)``); required unless
            ``insecure``.
        insecure: Serve without a token, for a server bound to loopback with one trainer
            (OpenEnv's unmodified clients send no credentials).
        env_config (EnvConfig | Mapping | None): Budgets, reward and transcripts; the defaults
            by default.
        tool_config (ToolConfig | Mapping | None): The sandbox settings; the defaults by default.
        host_config: The host's capacity (memory admission, idle eviction); the defaults by
            default.
        cache_dir: Where a lazy split's rebuilt episodes go; the dataset's own by default.
        max_concurrent_envs: OpenEnv's cap on WebSocket sessions; 64 by default.
        session_timeout: OpenEnv closes sessions idle this long (seconds; ``IDLE_SECONDS`` by
            default, so abandoned sessions do not hold the ``max_concurrent_envs`` slots; None:
            never, the host's ``idle_seconds`` still applies).

    Returns:
        The app; its backend is ``app.state.causaltrace_backend``, closed on shutdown.

    Raises:
        CausalTraceError: No token and not ``insecure``.
    """
    if not token and not insecure:
        raise CausalTraceError(
            "the OpenEnv app needs a bearer token: create_causaltrace_app(..., token=...) "
            f"(app_from_env reads ${TOKEN_ENV}); or insecure=True "
            f"(${INSECURE_ENV}=1) to serve without one on loopback"
        )
    backend = CausalTraceBackend(
        dataset,
        env_config=env_config,
        tool_config=tool_config,
        host_config=host_config,
        cache_dir=cache_dir,
    )
    app = create_app(
        functools.partial(CausalTraceEnvironment, backend),
        CausalTraceAction,
        CausalTraceObservation,
        env_name="causaltrace",
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_concurrent_envs, session_timeout=session_timeout
        ),
    )
    if token:
        app.add_middleware(TokenGuard, token=token)
    app.state.causaltrace_backend = backend
    app.router.on_shutdown.append(backend.close)
    return app


def app_from_env() -> FastAPI:
    """The app of the dataset named by ``$CAUSALTRACE_OPENENV_DATASET`` (for ``uvicorn
    --factory``), its token ``$CAUSALTRACE_SERVE_TOKEN`` (or none with
    ``$CAUSALTRACE_OPENENV_INSECURE=1``).

    Raises:
        CausalTraceError: The dataset variable is not set, or neither a token nor insecure.
    """
    dataset = os.environ.get(DATASET_ENV)
    if not dataset:
        raise CausalTraceError(f"set {DATASET_ENV} to a generated dataset directory")
    insecure = os.environ.get(INSECURE_ENV, "") == "1"
    return create_causaltrace_app(dataset, token=os.environ.get(TOKEN_ENV), insecure=insecure)


class CausalTraceClient(EnvClient[CausalTraceAction, CausalTraceObservation, CausalTraceState]):
    """OpenEnv's WebSocket client (``EnvClient``) with this environment's types: ``reset``,
    ``step`` and ``state`` are async (``.sync()`` gives the blocking wrapper). ``step`` also
    takes a ``{"name", "arguments"}`` mapping. ``token``: the server's bearer token, sent on the
    WebSocket handshake (OpenEnv 0.3's own client sends no headers)."""

    def __init__(self, base_url: str, *, token: str | None = None, **kwargs: Any):
        super().__init__(base_url, **kwargs)
        self._token = token

    async def connect(self) -> CausalTraceClient:
        """OpenEnv's connect, with the ``Authorization`` header when a token is given."""
        if self._ws is not None or not self._token:
            return await super().connect()
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            self._ws = await ws_connect(
                self._ws_url,
                open_timeout=self._connect_timeout,
                max_size=self._max_message_size,
                additional_headers=headers,
            )
        except Exception as exc:
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {exc}") from exc
        return self

    def _step_payload(self, action: CausalTraceAction | Mapping[str, Any]) -> dict[str, Any]:
        return _action(action).model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CausalTraceObservation]:
        observation = CausalTraceObservation(
            **payload.get("observation", {}),
            done=payload.get("done", False),
            reward=payload.get("reward"),
        )
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> CausalTraceState:
        return CausalTraceState(**payload)
