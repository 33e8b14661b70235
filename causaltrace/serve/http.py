"""Sessions over HTTP, for trainers that are not on Ray: a FastAPI app around one
:class:`~causaltrace.serve.SessionHost`.

The resources are sessions (``POST /sessions``, ``POST /sessions/{id}/step``,
``POST /sessions/{id}/turn``, ``DELETE /sessions/{id}``) and ``GET /health``. The client drives
the tool-call loop (its model emits OpenAI-style tool calls; it posts them here and feeds the
observations back), so the server holds no model and no policy. A session lives in the memory
of the process that opened it: behind a load balancer, route by session id (see
docs/serving.md).

Errors are JSON ``{"error": <code>, "detail": <text>}``: ``host_full`` (503, with
``Retry-After``), ``unknown_session`` (404), ``bad_request`` (400: unknown dataset or episode, bad
config), ``episode_over`` (409), ``timeout`` (504: the request took longer than
``request_timeout``; the call keeps running to its own tool time limit, its output goes to the
transcript, and the session stays usable). A malformed body is FastAPI's 422.

This module imports FastAPI; ``import causaltrace`` does not import it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from causaltrace.errors import CausalTraceError, RunFailure
from causaltrace.serve.host import HostConfig, HostFull, SessionHost, UnknownSession

log = logging.getLogger(__name__)

# Keys of a client's env_config the server refuses: a path on the server's file system is the
# operator's choice (set it in the host's own env_config), not a remote caller's.
SERVER_ONLY_ENV_KEYS = frozenset({"transcript_dir"})


class OpenRequest(BaseModel):
    """Body of ``POST /sessions``: a dataset directory on the server and one of its episodes."""

    dataset: str
    episode: str
    env_config: dict[str, Any] | None = None
    session_id: str | None = None


class ToolCallBody(BaseModel):
    """One tool call as the model emitted it; ``arguments`` is a JSON string or an object."""

    name: str
    arguments: str | dict[str, Any] = "{}"
    id: str | None = None

    def action(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "id": self.id}


class TurnRequest(BaseModel):
    """Body of ``POST /sessions/{id}/turn``: one assistant message (no calls: a text answer)."""

    calls: list[ToolCallBody] = Field(default_factory=list)
    content: str | None = None


class EpisodeOver(RuntimeError):
    """Raised by the session for a call after the episode ended (mapped to 409)."""


class RequestTimeout(Exception):
    """A request ran past ``request_timeout`` (mapped to 504; the call itself continues)."""


def _error(status: int, code: str, detail: str, headers: Mapping[str, str] | None = None):
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


def make_app(
    host: SessionHost,
    *,
    request_timeout: float | None = 120.0,
    retry_after: float = 1.0,
    expire_every: float | None = None,
    own_host: bool = True,
) -> FastAPI:
    """The HTTP app serving ``host``'s sessions.

    ``request_timeout``: seconds a request may take before a 504 (None: no limit); the tool
    call itself continues (shielded) so the session's namespace and transcript stay whole.
    ``retry_after``: seconds sent in ``Retry-After`` with a 503. ``expire_every``: how often idle
    sessions are closed (default: a quarter of the host's ``idle_seconds``, at most 60 s).
    ``own_host``: start the host when the app starts and close it when the app stops.
    ``app.state.request_timeout`` may be changed while serving.

    Args:
        host: The sessions' host.
        request_timeout: Seconds a request may take before a 504; 120 by default (None: no
            limit).
        retry_after: Seconds sent in ``Retry-After`` with a 503; 1 by default.
        expire_every: Seconds between idle-session sweeps; from the host's ``idle_seconds`` by
            default.
        own_host: Start and close ``host`` with the app; on by default.
    """
    background: set[asyncio.Task] = set()

    async def expire_loop(every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                closed = await host.expire_idle()
                if closed:
                    log.info("closed %d idle session(s)", closed)
            except Exception:  # keep expiring; one failed close must not stop the loop
                log.exception("idle expiry failed")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if own_host:
            await host.start()
        every = expire_every or min(60.0, max(1.0, host.config.idle_seconds / 4))
        expiry = asyncio.create_task(expire_loop(every))
        try:
            yield
        finally:
            expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await expiry
            for task in list(background):
                task.cancel()
            if own_host:
                await host.close()

    app = FastAPI(
        title="causaltrace sessions",
        description="Diagnosis episodes as session resources; the client drives the tool loop.",
        lifespan=lifespan,
    )
    app.state.host = host
    app.state.request_timeout = request_timeout
    # Routes return plain dicts (response_model=None): no pydantic pass over every StepResult.

    def keep(task: asyncio.Task, on_done: Callable[[asyncio.Task], None] | None = None) -> None:
        """Hold a shielded task that outlived its request, so it is not garbage collected and
        its failure is logged."""
        background.add(task)

        def done(t: asyncio.Task) -> None:
            background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("a timed-out request failed later: %r", t.exception())
            elif on_done is not None and not t.cancelled():
                on_done(t)

        task.add_done_callback(done)

    async def bounded(coro: Awaitable[Any], on_late: Callable[[asyncio.Task], None] | None = None):
        """Await ``coro`` for at most ``app.state.request_timeout`` s; past that, leave it
        running in the background (``on_late`` gets it when it finishes) and raise
        :class:`RequestTimeout`. Cancelling a tool call half-way would restart the episode's
        Python namespace and leave a call without output in the transcript."""
        task = asyncio.ensure_future(coro)
        limit = app.state.request_timeout
        try:
            return await asyncio.wait_for(asyncio.shield(task), limit)
        except TimeoutError:
            keep(task, on_late)
            raise RequestTimeout from None
        except asyncio.CancelledError:  # the client went away: finish (or clean up) anyway
            keep(task, on_late)
            raise

    @app.exception_handler(HostFull)
    async def host_full(request: Request, exc: HostFull) -> JSONResponse:
        seconds = max(1, round(retry_after))
        return _error(503, "host_full", str(exc), {"Retry-After": str(seconds)})

    @app.exception_handler(UnknownSession)
    async def unknown(request: Request, exc: UnknownSession) -> JSONResponse:
        return _error(404, "unknown_session", str(exc))

    @app.exception_handler(CausalTraceError)
    async def bad_request(request: Request, exc: CausalTraceError) -> JSONResponse:
        return _error(400, "bad_request", str(exc))

    @app.exception_handler(EpisodeOver)
    async def over(request: Request, exc: EpisodeOver) -> JSONResponse:
        return _error(409, "episode_over", str(exc))

    @app.exception_handler(RequestTimeout)
    async def timed_out(request: Request, exc: RequestTimeout) -> JSONResponse:
        return _error(
            504,
            "timeout",
            f"no answer within request_timeout={app.state.request_timeout:g} s; the call "
            "continues to its own tool time limit, its output is recorded in the transcript, "
            "and the session's next call waits for it",
        )

    async def episode_call(coro: Awaitable[Any]) -> Any:
        try:
            return await bounded(coro)
        except RuntimeError as exc:
            if "is over" in str(exc):  # DiagnosisSession.turn on a finished episode
                raise EpisodeOver(str(exc)) from None
            raise

    @app.post("/sessions", response_model=None)
    async def open_session(body: OpenRequest) -> dict[str, Any]:
        """Open a session of one episode: ``{session_id, prompt, tools}``."""
        refused = sorted(SERVER_ONLY_ENV_KEYS & set(body.env_config or {}))
        if refused:
            raise CausalTraceError(
                f"env_config key(s) {refused} are set by the server operator, not per request"
            )
        env = body.env_config
        if env is not None and host.env_config is not None:
            base = host.env_config
            if not isinstance(base, Mapping):
                base = asdict(base)
            env = {**base, **env}  # the operator's transcript_dir and defaults still apply

        def close_orphan(task: asyncio.Task) -> None:
            # The client gave up before learning the id; free the slot unless it chose the id.
            if body.session_id is None:
                sid = task.result()["session_id"]
                keep(asyncio.ensure_future(host.close_session(sid)))

        return await bounded(
            host.open(body.dataset, body.episode, env, body.session_id), close_orphan
        )

    @app.post("/sessions/{session_id}/step", response_model=None)
    async def step(session_id: str, body: ToolCallBody) -> dict[str, Any]:
        """One tool call; the StepResult as a dict."""
        return await episode_call(host.step(session_id, body.action()))

    @app.post("/sessions/{session_id}/turn", response_model=None)
    async def turn(session_id: str, body: TurnRequest) -> list[dict[str, Any]]:
        """One assistant message with its tool calls; one StepResult dict per call."""
        calls = [c.action() for c in body.calls]
        return await episode_call(host.turn(session_id, calls, body.content))

    @app.delete("/sessions/{session_id}", response_model=None)
    async def close_session(session_id: str) -> dict[str, Any]:
        """Close a session and free its slot; its transcript."""
        return await host.close_session(session_id)

    @app.get("/health", response_model=None)
    async def health() -> dict[str, Any]:
        """Live sessions, capacity, refusals and the sandbox in use."""
        return host.health()

    return app


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    host_config: Mapping[str, Any] | None = None,
    tool_config: Mapping[str, Any] | None = None,
    env_config: Mapping[str, Any] | None = None,
    request_timeout: float | None = 120.0,
    log_level: str = "info",
) -> None:
    """Run the app under uvicorn until interrupted (``causaltrace serve``). One process, one
    event loop: sessions live in this process, so run one server per machine and route by id.

    Args:
        host: The address to listen on; ``127.0.0.1`` by default.
        port: The port to listen on; 8000 by default.
        host_config: :class:`~causaltrace.serve.HostConfig` fields; the defaults by default.
        tool_config: :class:`~causaltrace.tools.ToolConfig` fields; the defaults by default.
        env_config: The sessions' default :class:`~causaltrace.env.EnvConfig` fields; the
            defaults by default.
        request_timeout: Seconds a request may take before a 504; 120 by default (None: no
            limit).
        log_level: uvicorn's log level; ``"info"`` by default.

    Raises:
        RunFailure: The server did not start (for example, the port is taken).
    """
    # optional: the serve extra
    import uvicorn

    session_host = SessionHost(tool_config, HostConfig.from_mapping(host_config), env_config)
    app = make_app(session_host, request_timeout=request_timeout)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level))
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C after a clean shutdown
        return
    if not server.started:
        raise RunFailure("the server did not start (the reason is logged above)")
