"""A client for :mod:`causaltrace.serve.http`: the same async methods as
:class:`~causaltrace.serve.SessionHost`, over HTTP, raising the same named errors.

A trainer swaps ``SessionHost(...)`` for ``HttpHost("http://node:8000")`` and keeps its rollout
code. POSTs are not retried (a repeated tool call would run twice and count twice against the
episode's budget), except once after a 401 when the token file changed (the server restarted
with a new token, and a refused request did nothing); ``health`` is, since it has no effect.
Imports httpx only.

The bearer token is, in this order: the ``token`` argument, ``$CAUSALTRACE_SERVE_TOKEN``, the
``token_file`` argument, or (for a server on this machine only, so that a local secret never
goes to another host) the file the server writes by default for the URL's port.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from causaltrace.env.session import ToolCall
from causaltrace.errors import CausalTraceError, RunFailure
from causaltrace.serve.host import (
    TOKEN_ENV,
    HostFull,
    OverCap,
    UnknownSession,
    default_token_file,
)


class RequestTimedOut(CausalTraceError):
    """The server answered 504: the call ran past its ``request_timeout``. It continues on the
    server to its own tool time limit and its output is in the transcript; the session is still
    usable."""


class EnvServerError(RunFailure):
    """Any other non-success answer from the server (the status and body are in the message)."""


class Unauthorized(CausalTraceError):
    """The server answered 401: no token was found, or it is not the server's (the message
    says where the client looked)."""


class RequestTooLarge(CausalTraceError):
    """The server answered 413: the request body is above its ``--max-body-bytes``."""


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_token(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


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
    The token is looked up as the module says; a file is read again when the server refuses it
    (or when none was found yet: the server may still be starting).

    Args:
        base_url: The server's URL.
        timeout: Seconds to wait for an answer; 300 by default.
        token: The server's bearer token; from the environment or a token file by default.
        token_file: The file holding the token; the server's default file for the URL's port
            (on this machine only) by default.
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
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        max_connections: int = 256,
        health_retries: int = 3,
        client: httpx.AsyncClient | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.health_retries = health_retries
        self._fixed_token = token or os.environ.get(TOKEN_ENV) or None
        self._token_source = "the token argument" if token else f"${TOKEN_ENV}"
        self.token_file: Path | None = None
        if self._fixed_token is None:
            if token_file is not None:
                self.token_file = Path(token_file).expanduser()
            else:
                url = urlsplit(self.base_url)
                port = url.port or (443 if url.scheme == "https" else 80)
                if _is_loopback(url.hostname):
                    self.token_file = default_token_file(port)
        self._file_token: str | None = None
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

    def token(self) -> str | None:
        """The bearer token to send (None: none found; the server will answer 401)."""
        if self._fixed_token is not None:
            return self._fixed_token
        if self._file_token is None and self.token_file is not None:
            self._file_token = _read_token(self.token_file)
        return self._file_token

    def _where(self) -> str:
        if self._fixed_token is not None:
            return f"the token came from {self._token_source}"
        if self.token_file is None:
            return (
                f"no token: pass token=, set {TOKEN_ENV}, or pass token_file= (the server's "
                "default token file is read only for a server on this machine)"
            )
        if self._file_token is None:
            return (
                f"no token: {TOKEN_ENV} is not set and {self.token_file} could not be read; pass "
                "token= or token_file="
            )
        return f"the token came from {self.token_file}"

    async def _send(self, method: str, path: str, body: Any) -> httpx.Response:
        token = self.token()
        headers = {"Authorization": f"Bearer {token}"} if token else None
        return await self._client.request(method, path, json=body, headers=headers)

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        response = await self._send(method, path, body)
        if response.status_code == 401 and self._fixed_token is None and self.token_file:
            # A refused request did nothing: the server may have restarted with a new token.
            before, self._file_token = self._file_token, None
            if self.token() is not None and self.token() != before:
                response = await self._send(method, path, body)
        if response.is_success:
            return response.json()
        try:
            payload = response.json()
            detail = str(payload.get("detail", payload))
            code = payload.get("error") if isinstance(payload, dict) else None
        except ValueError:
            detail, code = response.text, None
        status = response.status_code
        if status == 401:
            raise Unauthorized(f"{method} {path}: {detail} ({self._where()})")
        if status == 413:
            raise RequestTooLarge(detail)
        if status == 422 and code == "over_cap":
            raise OverCap(detail)
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
            OverCap: A budget in ``env_config`` is above the server's cap (HTTP 422).
            Unauthorized: No token, or not the server's (HTTP 401).
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
