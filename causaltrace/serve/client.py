"""A client for :mod:`causaltrace.serve.http`: the same async methods as
:class:`~causaltrace.serve.SessionHost`, over HTTP, raising the same named errors.

A trainer swaps ``SessionHost(...)`` for ``HttpHost("http://node:8000")`` and keeps its rollout
code. POSTs are not retried (a repeated tool call would run twice and count twice against the
episode's budget); ``health`` is, since it has no effect. Imports httpx only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from causaltrace.env.session import ToolCall
from causaltrace.errors import CausalTraceError, RunFailure
from causaltrace.serve.host import HostFull, UnknownSession


class RequestTimedOut(CausalTraceError):
    """The server answered 504: the call ran past its ``request_timeout``. It continues on the
    server to its own tool time limit and its output is in the transcript; the session is still
    usable."""


class EnvServerError(RunFailure):
    """Any other non-success answer from the server (the status and body are in the message)."""


def _action(action: Any) -> dict[str, Any]:
    """A tool call as the server's body: from a ToolCall, an OpenAI tool call or a dict."""

    call = ToolCall.of(action)
    body: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
    if call.id is not None:
        body["id"] = call.id
    return body


class HttpHost:
    """Sessions on a ``causaltrace serve`` server. Use ``async with HttpHost(url) as host``.

    ``timeout``: seconds httpx waits for an answer; keep it above the server's
    ``request_timeout`` so the server's 504 (which says the session is still usable) arrives
    before the client gives up. ``health_retries``: attempts of ``health`` on connection errors.

    Args:
        base_url: The server's URL.
        timeout: Seconds to wait for an answer; 300 by default.
        max_connections: The connection pool's size; 256 by default.
        health_retries: Attempts of :meth:`health` on connection errors; 3 by default.
        client: An ``httpx.AsyncClient`` to use instead of a new one (then ``timeout`` and
            ``max_connections`` are not applied).
    """

    def __init__(
        self,
        base_url: str,
        timeout: float = 300.0,
        *,
        max_connections: int = 256,
        health_retries: int = 3,
        client: httpx.AsyncClient | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.health_retries = health_retries
        self._client = client or httpx.AsyncClient(
            base_url=self.base_url,
            timeout=timeout,
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    async def __aenter__(self) -> HttpHost:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> HttpHost:
        """Nothing to start (the server owns the runtime); for parity with SessionHost."""
        return self

    async def close(self) -> None:
        """Close the connection pool (sessions on the server stay open until closed)."""
        await self._client.aclose()

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        response = await self._client.request(method, path, json=body)
        if response.is_success:
            return response.json()
        try:
            payload = response.json()
            detail = str(payload.get("detail", payload))
        except ValueError:
            detail = response.text
        status = response.status_code
        if status == 503:
            raise HostFull(f"{detail} (retry after {response.headers.get('Retry-After', '?')} s)")
        if status == 404:
            raise UnknownSession(detail)
        if status == 400:
            raise CausalTraceError(detail)
        if status == 409:
            raise RuntimeError(detail)  # what SessionHost raises for a finished episode
        if status == 504:
            raise RequestTimedOut(detail)
        raise EnvServerError(f"{method} {path}: HTTP {status}: {detail}")

    async def open(
        self,
        dataset: str,
        episode: str,
        env_config: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Open a session; ``{"session_id", "prompt", "tools"}``. ``dataset`` is a path on the
        server.

        Args:
            dataset: The dataset directory (a path on the server).
            episode: The episode id.
            env_config: Budgets and reward of this session (:class:`~causaltrace.env.EnvConfig`
                keys); the host's by default.
            session_id: The id to give the session; a fresh one by default.

        Raises:
            HostFull: The server has no capacity (HTTP 503).
            CausalTraceError: A bad request (HTTP 400).
        """
        body: dict[str, Any] = {"dataset": str(dataset), "episode": str(episode)}
        if env_config is not None:
            body["env_config"] = dict(env_config)
        if session_id is not None:
            body["session_id"] = session_id
        return await self._request("POST", "/sessions", body)

    async def step(self, sid: str, action: Any) -> dict[str, Any]:
        """One tool call; the StepResult as a dict.

        Args:
            sid: The session id ``open`` returned.
            action: The tool call (see :meth:`~causaltrace.env.session.ToolCall.of`).

        Raises:
            UnknownSession: The server holds no such session (HTTP 404).
        """
        return await self._request("POST", f"/sessions/{quote(sid, safe='')}/step", _action(action))

    async def turn(
        self, sid: str, calls: Sequence[Any], content: str | None = None
    ) -> list[dict[str, Any]]:
        """One assistant message with its tool calls (none: a final text answer).

        Args:
            sid: The session id ``open`` returned.
            calls: The message's tool calls.
            content: The message's text; none by default.

        Raises:
            UnknownSession: The server holds no such session (HTTP 404).
        """
        body = {"calls": [_action(c) for c in calls], "content": content}
        return await self._request("POST", f"/sessions/{quote(sid, safe='')}/turn", body)

    async def close_session(self, sid: str) -> dict[str, Any]:
        """Close a session; its transcript.

        Args:
            sid: The session id ``open`` returned.

        Raises:
            UnknownSession: The server holds no such session (HTTP 404).
        """
        return await self._request("DELETE", f"/sessions/{quote(sid, safe='')}")

    async def health(self) -> dict[str, Any]:
        """The server's ``host.health()``; retried on connection errors (it has no effect)."""
        for attempt in range(max(1, self.health_retries)):
            try:
                return await self._request("GET", "/health")
            except httpx.TransportError:
                if attempt + 1 >= max(1, self.health_retries):
                    raise
                await asyncio.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")
