"""Sessions over HTTP, for trainers that are not on Ray: a FastAPI app around one
:class:`~causaltrace.serve.SessionHost`.

The resources are sessions (``POST /sessions``, ``POST /sessions/{id}/step``,
``POST /sessions/{id}/turn``, ``DELETE /sessions/{id}``) and ``GET /health``. The client drives
the tool-call loop (its model emits OpenAI-style tool calls; it posts them here and feeds the
observations back), so the server holds no model and no policy. A session lives in the memory
of the process that opened it: behind a load balancer, route by session id (see
docs/serving.md).

Every route but ``GET /health`` needs ``Authorization: Bearer <token>`` (401 otherwise): a session
id is not a secret (it is in logs and URLs), and whoever drives a session gets its reward. The
request guard (:class:`RequestGuard`, pure ASGI, in front of FastAPI) checks the token, then reads
the body itself, refusing it (413) past ``max_body_bytes`` (by ``Content-Length`` before reading
anything, or by counting a chunked body as it arrives) and (408) when it takes longer than
``body_timeout``, so that nothing unbounded reaches memory. Under uvicorn (:func:`uvicorn_config`)
a connection must send a complete request head within ``header_timeout`` (uvicorn itself has no
such limit for a fresh connection), idles at most ``keep_alive_timeout`` between requests, and at
most ``max_connections`` are open. A client's budgets are capped (:class:`SessionCaps`, 422).

Errors are JSON ``{"error": <code>, "detail": <text>}``: ``unauthorized`` (401, with
``WWW-Authenticate: Bearer``), ``body_too_large`` (413), ``body_timeout`` (408), ``over_cap``
(422: a budget above the server's cap), ``host_full`` (503, with ``Retry-After``),
``unknown_session`` (404), ``bad_request`` (400: unknown dataset or episode, bad config),
``episode_over`` (409), ``timeout`` (504: the request took longer than ``request_timeout``; the
call keeps running to its own tool time limit, its output goes to the transcript, and the
session stays usable). A malformed body is FastAPI's 422.

This module imports FastAPI; ``import causaltrace`` does not import it. It imports uvicorn only
to run the app (:func:`uvicorn_config`, :func:`serve`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from causaltrace.errors import CausalTraceError, RunFailure
from causaltrace.scoring.parsing import ParsePolicy
from causaltrace.serve.host import (
    MAX_SESSION_ID_CHARS,
    TOKEN_ENV,
    HostConfig,
    HostFull,
    OverCap,
    SessionHost,
    UnknownSession,
    default_token_file,
)

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger(__name__)

# Keys of a client's env_config the server refuses: a path on the server's file system is the
# operator's choice (set it in the host's own env_config), not a remote caller's.
SERVER_ONLY_ENV_KEYS = frozenset({"transcript_dir"})

MiB = 1024 * 1024
# Seconds uvicorn waits for in-flight requests on shutdown before cancelling them (tool calls
# are shielded and finish on their own; the host then closes every session).
GRACEFUL_SHUTDOWN_SECONDS = 30


def _check_positive(where: str, values: Mapping[str, float | int]) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise CausalTraceError(f"{where}: {name} must be a number > 0, got {value!r}")


@dataclass(frozen=True)
class ServeLimits:
    """What one connection and one request may cost the server, whoever sends them: without
    these a 150 MB body was parsed into memory and idle connections were held forever.

    Args:
        max_body_bytes: The largest request body; 4 MiB by default (413 beyond).
        body_timeout: Seconds from a request's head to the end of its body; 60 by default (408
            beyond).
        header_timeout: Seconds a connection has to send a complete request head, from when it
            opens or its previous response ends; 10 by default (then it is closed).
        keep_alive_timeout: Seconds an idle keep-alive connection is kept; 5 by default
            (uvicorn's ``timeout_keep_alive``).
        max_connections: Connections open at once; 512 by default (one more is answered 503
            and closed; uvicorn's ``limit_concurrency`` also answers 503 past that many
            requests in flight).
    """

    max_body_bytes: int = 4 * MiB
    body_timeout: float = 60.0
    header_timeout: float = 10.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 512

    def __post_init__(self) -> None:
        _check_positive("serve limits", asdict(self))


@dataclass(frozen=True)
class SessionCaps:
    """The most a client may ask for when it opens a session (``env_config``), so that one
    request cannot book the server for ever (``max_tool_calls=10**9``). The defaults are the
    library's for the answer parser and a generous maximum for the budgets (30 tool calls and
    40 turns by default). A turn may carry at most ``max_tool_calls`` calls.

    Args:
        max_tool_calls: Cap of ``env_config.max_tool_calls`` (and of the reward's
            ``parse.max_tool_calls``, and of the calls in one turn); 100 by default.
        max_turns: Cap of ``env_config.max_turns``; 100 by default.
        max_answer_chars: Cap of the reward's ``parse.max_answer_chars``; the parser's default.
        max_output_chars: Cap of the reward's ``parse.max_output_chars``; the parser's default.
        max_answers: Cap of the reward's ``parse.max_answers``; the parser's default.
    """

    max_tool_calls: int = 100
    max_turns: int = 100
    max_answer_chars: int = ParsePolicy.max_answer_chars
    max_output_chars: int = ParsePolicy.max_output_chars
    max_answers: int = ParsePolicy.max_answers

    def __post_init__(self) -> None:
        _check_positive("session caps", asdict(self))

    def violations(self, env_config: Mapping[str, Any] | None) -> list[str]:
        """What in a client's ``env_config`` is above a cap, one text per field (empty: all
        within). Values that are not numbers are left to the config's own validation.

        Args:
            env_config: The ``env_config`` of a ``POST /sessions`` body.
        """
        env = env_config or {}
        checks: list[tuple[str, Any, int]] = [
            ("env_config.max_tool_calls", env.get("max_tool_calls"), self.max_tool_calls),
            ("env_config.max_turns", env.get("max_turns"), self.max_turns),
        ]
        reward = env.get("reward")
        parse = reward.get("parse") if isinstance(reward, Mapping) else None
        if isinstance(parse, Mapping):
            for key in ("max_answer_chars", "max_output_chars", "max_answers", "max_tool_calls"):
                checks.append(
                    (f"env_config.reward.parse.{key}", parse.get(key), getattr(self, key))
                )
        return [
            f"{name}={value!r} is above this server's cap of {cap}"
            for name, value, cap in checks
            if isinstance(value, int | float) and not isinstance(value, bool) and value > cap
        ]


def _json_response(
    status: int, code: str, detail: str, headers: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two ASGI messages of a JSON error that also closes the connection (its body may
    be unread)."""
    body = json.dumps({"error": code, "detail": detail}).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    return (
        {"type": "http.response.start", "status": status, "headers": raw},
        {"type": "http.response.body", "body": body, "more_body": False},
    )


# The routes both guards let through without the token.
PUBLIC_ROUTES = frozenset({("GET", "/health")})


def bearer_refusal(scope: Mapping[str, Any], token: bytes) -> tuple[str, str] | None:
    """Why an ASGI request's (or WebSocket handshake's) ``Authorization`` header does not carry
    ``token``, as (RFC 6750 error code, text); None: it does. Compared in constant time."""
    values = [v for k, v in scope["headers"] if k == b"authorization"]
    if not values:
        return "invalid_request", (
            "missing bearer token: send 'Authorization: Bearer <token>' (the token is the "
            f"server's {TOKEN_ENV}, or in the token file it printed at start)"
        )
    scheme, _, credentials = values[0].strip().partition(b" ")
    if len(values) > 1 or scheme.lower() != b"bearer" or not credentials.strip():
        return "invalid_request", "malformed Authorization: expected one 'Bearer <token>'"
    if not hmac.compare_digest(credentials.strip(), token):
        return "invalid_token", "invalid bearer token"
    return None


async def send_unauthorized(send: Any, refused: tuple[str, str]) -> None:
    """A 401 with the RFC 6750 challenge for ``refused`` (:func:`bearer_refusal`)."""
    error, problem = refused
    challenge = f'Bearer realm="causaltrace", error="{error}"'
    for message in _json_response(401, "unauthorized", problem, {"WWW-Authenticate": challenge}):
        await send(message)


class TokenGuard:
    """Pure ASGI middleware that lets through only requests and WebSocket handshakes carrying
    the bearer token: a refused request gets a 401, a refused handshake is closed (code 1008,
    policy violation) before it is accepted, so no session is created. ``GET /health`` is
    public. For apps whose protocol has sessions over WebSockets (the OpenEnv app), where
    :class:`RequestGuard` refuses every WebSocket.

    Args:
        app: The ASGI app behind it.
        token: The bearer token.
    """

    PUBLIC = PUBLIC_ROUTES

    def __init__(self, app: Any, *, token: str):
        if not token:
            raise CausalTraceError("the server's bearer token is empty")
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            public = (scope["method"], scope["path"]) in self.PUBLIC
            refused = None if public else bearer_refusal(scope, self.token)
            if refused is not None:
                await send_unauthorized(send, refused)
                return
        elif scope["type"] == "websocket" and bearer_refusal(scope, self.token) is not None:
            await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(scope, receive, send)


class RequestGuard:
    """Pure ASGI middleware in front of the app: the bearer token, then the body read within
    ``max_body_bytes`` and ``body_timeout`` before the app sees the request (the app then gets
    the body in one message). It answers 401, 413 and 408 itself, before anything is parsed.

    Args:
        app: The ASGI app behind it.
        token: The bearer token every request but ``GET /health`` must carry.
        max_body_bytes: The largest body accepted.
        body_timeout: Seconds from the head to the end of the body.
    """

    PUBLIC = PUBLIC_ROUTES

    def __init__(self, app: Any, *, token: str, max_body_bytes: int, body_timeout: float):
        if not token:
            raise CausalTraceError("the server's bearer token is empty")
        self.app = app
        self.token = token.encode()
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout

    def refusal(self, scope: Mapping[str, Any]) -> tuple[str, str] | None:
        """Why the request's credentials are refused, as (RFC 6750 error code, text); None:
        accepted, or not needed (``GET /health``)."""
        if (scope["method"], scope["path"]) in self.PUBLIC:
            return None
        return bearer_refusal(scope, self.token)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":  # none are served; never past the token
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)  # the lifespan
            return
        refused = self.refusal(scope)
        if refused is not None:
            await send_unauthorized(send, refused)
            return
        body = await self.read_body(scope, receive, send)
        if body is None:
            return
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return await receive()  # a disconnect, for an app that listens for it
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def read_body(self, scope: Any, receive: Any, send: Any) -> bytes | None:
        """The whole body, or None once a refusal was sent (or the client went away)."""
        limit = self.max_body_bytes
        for name, value in scope["headers"]:
            if name == b"content-length" and value.strip().isdigit() and int(value) > limit:
                await self.too_large(send, f"Content-Length {int(value)}")
                return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                detail = (
                    f"the request body did not arrive within body_timeout={self.body_timeout:g} s"
                )
                for part in _json_response(408, "body_timeout", detail):
                    await send(part)
                return None
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self.too_large(send, f"more than {limit} bytes")
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def too_large(self, send: Any, what: str) -> None:
        detail = (
            f"request body too large: {what}; this server accepts at most "
            f"{self.max_body_bytes} bytes (max_body_bytes, --max-body-bytes)"
        )
        for message in _json_response(413, "body_too_large", detail):
            await send(message)


class OpenRequest(BaseModel):
    """Body of ``POST /sessions``: a dataset directory on the server and one of its episodes."""

    dataset: str
    episode: str
    env_config: dict[str, Any] | None = None
    session_id: str | None = Field(default=None, min_length=1, max_length=MAX_SESSION_ID_CHARS)


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
    token: str,
    request_timeout: float | None = 120.0,
    retry_after: float = 1.0,
    expire_every: float | None = None,
    own_host: bool = True,
    limits: ServeLimits | None = None,
    caps: SessionCaps | None = None,
    docs: bool = False,
) -> FastAPI:
    """The HTTP app serving ``host``'s sessions.

    ``token``: the bearer token every route but ``GET /health`` requires (there is no way to
    turn it off: whoever drives a session gets its reward). ``request_timeout``: seconds a
    request may take before a 504 (None: no limit); the tool call itself continues (shielded)
    so the session's namespace and transcript stay whole. ``retry_after``: seconds sent in
    ``Retry-After`` with a 503. ``expire_every``: how often idle sessions are closed (default: a
    quarter of the host's ``idle_seconds``, at most 60 s). ``own_host``: start the host when the
    app starts and close it when the app stops. ``app.state.request_timeout`` may be changed
    while serving. ``limits``' body limits apply here; its connection limits apply under
    :func:`uvicorn_config`.

    Args:
        host: The sessions' host.
        token: The bearer token (e.g. ``secrets.token_urlsafe(32)``).
        request_timeout: Seconds a request may take before a 504; 120 by default (None: no
            limit).
        retry_after: Seconds sent in ``Retry-After`` with a 503; 1 by default.
        expire_every: Seconds between idle-session sweeps; from the host's ``idle_seconds`` by
            default.
        own_host: Start and close ``host`` with the app; on by default.
        limits: Body size and time limits; :class:`ServeLimits` defaults by default.
        caps: The most a client's ``env_config`` may ask for; :class:`SessionCaps` defaults
            by default.
        docs: Serve ``/docs``, ``/redoc`` and ``/openapi.json`` (behind the token); off by
            default.
    """
    limits = limits or ServeLimits()
    caps = caps or SessionCaps()
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
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    app.add_middleware(
        RequestGuard,
        token=token,
        max_body_bytes=limits.max_body_bytes,
        body_timeout=limits.body_timeout,
    )
    app.state.host = host
    app.state.request_timeout = request_timeout
    app.state.limits = limits
    app.state.caps = caps
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

    @app.exception_handler(OverCap)
    async def over_cap(request: Request, exc: OverCap) -> JSONResponse:
        return _error(422, "over_cap", str(exc))

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
        over = caps.violations(body.env_config)
        if over:
            raise OverCap("; ".join(over))
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
        if len(body.calls) > caps.max_tool_calls:
            raise OverCap(
                f"calls: {len(body.calls)} in one turn is above this server's cap of "
                f"{caps.max_tool_calls}"
            )
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


class HeadDeadline:
    """Mixin for uvicorn's ``H11Protocol`` (see :func:`uvicorn_config`): a connection must
    send a complete request head within ``header_timeout`` seconds of opening, or of its
    previous response ending, or it is closed. uvicorn arms its keep-alive timer only after a
    response, and cancels it on the first byte of the next request, so a connection that sends
    nothing, or a head a byte at a time, was held for ever. The timer is the loop's
    ``call_later``, as for uvicorn's keep-alive. Connections beyond ``max_connections`` are
    answered 503 and closed at once."""

    header_timeout: float = 10.0
    max_connections: int | None = None
    _head_timer: asyncio.TimerHandle | None = None
    _head_cycle: Any = None

    # The attributes below are uvicorn's (H11Protocol); declared for readers and type checkers.
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    connections: set[Any]
    cycle: Any

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            start, body = _json_response(
                503,
                "too_many_connections",
                f"this server holds at most {self.max_connections} connections (--max-connections)",
            )
            head = b"".join(k + b": " + v + b"\r\n" for k, v in start["headers"])
            transport.write(b"HTTP/1.1 503 Service Unavailable\r\n" + head + b"\r\n" + body["body"])
            transport.close()
            return
        self._arm_head_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        self._disarm_if_head_arrived()

    def on_response_complete(self) -> None:
        # Armed before uvicorn's handler runs, which may start a pipelined request at once.
        if not self.transport.is_closing():
            self._arm_head_deadline()
        super().on_response_complete()  # type: ignore[misc]
        self._disarm_if_head_arrived()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_cycle = self.cycle  # a new request head replaces uvicorn's cycle object
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _disarm_if_head_arrived(self) -> None:
        if self._head_timer is not None and self.cycle is not self._head_cycle:
            self._disarm_head_deadline()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.cycle is self._head_cycle and not self.transport.is_closing():
            log.debug(  # not info: an attack would flood the log
                "closed a connection that sent no complete request head within %g s",
                self.header_timeout,
            )
            self.transport.close()


def uvicorn_config(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    limits: ServeLimits | None = None,
    log_level: str = "info",
) -> uvicorn.Config:
    """uvicorn's config for ``app`` with the connection limits of ``limits``: the h11 protocol
    with :class:`HeadDeadline` (the request-head timeout and the connection cap),
    ``timeout_keep_alive``, ``limit_concurrency``, no WebSockets, and a bounded graceful
    shutdown. :func:`serve` runs it; tests use it on an ephemeral port.

    Args:
        app: The ASGI app (:func:`make_app`).
        host: The address to listen on; ``127.0.0.1`` by default.
        port: The port to listen on; 8000 by default (0: any free port).
        limits: The limits; :class:`ServeLimits` defaults by default.
        log_level: uvicorn's log level; ``"info"`` by default.
    """
    # optional: uvicorn (the serve extra) is needed only to run the app
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    limits = limits or ServeLimits()
    protocol = type(
        "GuardedH11Protocol",
        (HeadDeadline, H11Protocol),
        {"header_timeout": limits.header_timeout, "max_connections": limits.max_connections},
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol,
        ws="none",
        timeout_keep_alive=limits.keep_alive_timeout,
        # uvicorn answers 503 once this many connections are open or requests in flight
        # (counting the one asking); HeadDeadline closes any connection beyond the cap.
        limit_concurrency=limits.max_connections + 1,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def write_token_file(path: str | os.PathLike[str], token: str) -> Path:
    """Write ``token`` to ``path``, readable by this user only from the first byte: the file is
    created with mode 0600 and ``O_EXCL`` (a file left by an earlier run is removed first; one
    that appears in between, or a symbolic link, is refused rather than written through). The
    directory is created with mode 0700 if missing.

    Args:
        path: The token file.
        token: The token.

    Raises:
        RunFailure: The file could not be created.
    """
    path = Path(path).expanduser()
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise RunFailure(f"cannot create the token file {path}: {exc}") from None
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return path


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (as uvicorn binds), so that the port is taken before the
    token file for it is written."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RunFailure(f"cannot listen on {host}:{port}: {exc}") from None
    sock.set_inheritable(True)
    return sock


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    host_config: Mapping[str, Any] | None = None,
    tool_config: Mapping[str, Any] | None = None,
    env_config: Mapping[str, Any] | None = None,
    request_timeout: float | None = 120.0,
    log_level: str = "info",
    token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    limits: ServeLimits | None = None,
    caps: SessionCaps | None = None,
    docs: bool = False,
) -> None:
    """Run the app under uvicorn until interrupted (``causaltrace serve``). One process, one
    event loop: sessions live in this process, so run one server per machine and route by id.

    The bearer token is ``token``, else ``$CAUSALTRACE_SERVE_TOKEN``, else a new one
    (``secrets.token_urlsafe(32)``) written to ``token_file`` (mode 0600; by default
    :func:`~causaltrace.serve.host.default_token_file` of the port, where a client on this
    machine looks) and removed on shutdown. Where it came from is printed on stderr; the token
    is not.

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
        token: The bearer token; from the environment or generated by default.
        token_file: Where a generated token is written; the port's default file by default.
        limits: Body, time and connection limits; :class:`ServeLimits` defaults by default.
        caps: The most a client may ask for; :class:`SessionCaps` defaults by default.
        docs: Serve ``/docs``, ``/redoc`` and ``/openapi.json`` (behind the token); off by
            default.

    Raises:
        RunFailure: The server did not start (for example, the port is taken, or the token
            file cannot be written).
    """
    # optional: the serve extra
    import uvicorn

    limits = limits or ServeLimits()
    sock = _listen(host, port)
    written: Path | None = None
    token = token or os.environ.get(TOKEN_ENV) or None
    try:
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        print(f"causaltrace serve: listening on http://{shown}:{bound}", file=sys.stderr)
        if token is not None:
            print(
                f"causaltrace serve: bearer token from {TOKEN_ENV} or the caller", file=sys.stderr
            )
        else:
            token = secrets.token_urlsafe(32)
            written = write_token_file(token_file or default_token_file(bound), token)
            print(
                f"causaltrace serve: bearer token written to {written} (mode 0600; clients on "
                f"this machine read it there, others need {TOKEN_ENV})",
                file=sys.stderr,
            )
        session_host = SessionHost(tool_config, HostConfig.from_mapping(host_config), env_config)
        app = make_app(
            session_host,
            token=token,
            request_timeout=request_timeout,
            limits=limits,
            caps=caps,
            docs=docs,
        )
        server = uvicorn.Server(uvicorn_config(app, host, port, limits=limits, log_level=log_level))
        # uvicorn re-raises SIGINT or SIGTERM with the handler it found after a clean
        # shutdown; as KeyboardInterrupt both end here, and the token file is removed below.
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGTERM)
        if main_thread:
            signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:
            return
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)
        if not server.started:
            raise RunFailure("the server did not start (the reason is logged above)")
    finally:
        sock.close()
        if written is not None:
            with contextlib.suppress(OSError):
                if written.read_text().strip() == token:  # not a later server's
                    written.unlink()
