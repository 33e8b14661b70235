"""The bearer-token guard for apps whose sessions live on WebSockets (the OpenEnv app, issue 42
item 4): a request without the token gets a 401 with its RFC 6750 challenge, a WebSocket
handshake without it is closed (1008) before the app accepts it, so no session is created;
``GET /health`` stays public. Driven through Starlette's own test client (HTTP and WebSocket),
so it runs without openenv; tests/serve/test_openenv.py drives the real OpenEnv app."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from causaltrace.errors import CausalTraceError
from causaltrace.serve.http import TokenGuard

TOKEN = "s3cret-token"


def guarded_app():
    """A tiny app that counts the WebSocket sessions it accepted."""
    accepted = []

    async def health(request):
        return JSONResponse({"ok": True})

    async def schema(request):
        return JSONResponse({"schema": 1})

    async def ws(websocket):
        await websocket.accept()
        accepted.append(1)
        await websocket.send_text("hello")
        await websocket.close()

    app = Starlette(
        routes=[Route("/health", health), Route("/schema", schema), WebSocketRoute("/ws", ws)]
    )
    app.add_middleware(TokenGuard, token=TOKEN)
    return app, accepted


@pytest.mark.parametrize(
    "headers, error",
    [
        ({}, "invalid_request"),
        ({"Authorization": f"Basic {TOKEN}"}, "invalid_request"),
        ({"Authorization": "Bearer wrong"}, "invalid_token"),
    ],
)
def test_requests_without_the_token_are_refused(headers, error):
    app, _ = guarded_app()
    with TestClient(app) as client:
        response = client.get("/schema", headers=headers)
        assert response.status_code == 401
        assert f'error="{error}"' in response.headers["www-authenticate"]
        assert client.get("/health").status_code == 200  # public
        ok = client.get("/schema", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and ok.json() == {"schema": 1}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_websocket_handshakes_without_the_token_open_no_session(headers):
    app, accepted = guarded_app()
    with TestClient(app) as client:
        with (
            pytest.raises(WebSocketDisconnect) as closed,
            client.websocket_connect("/ws", headers=headers) as ws,
        ):
            ws.receive_text()
        assert closed.value.code == 1008
        assert accepted == []
        with client.websocket_connect("/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            assert ws.receive_text() == "hello"
        assert accepted == [1]


def test_an_empty_token_is_refused_at_construction():
    with pytest.raises(CausalTraceError, match="token is empty"):
        TokenGuard(lambda *a: None, token="")
