"""What the server refuses, on a real uvicorn server on loopback (as ``causaltrace serve`` runs
it): requests without the bearer token, bodies past the limit, connections that send no request
head in time or too many at once, budgets above the caps, and the API docs unless asked for.

None of these tests starts the tools' sandbox: every request here is refused before a session
would open (the host is never started), except for unknown session ids, which the host answers
without its tools."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import threading
import time

import httpx
import pytest
from _serve_support import (
    BackgroundServer,
    is_open,
    read_response,
    seconds_until_closed,
)

from causaltrace.serve import HostConfig, SessionHost, UnknownSession
from causaltrace.serve.client import HttpHost, RequestTooLarge, Unauthorized
from causaltrace.serve.host import TOKEN_ENV, OverCap, default_token_file
from causaltrace.serve.http import ServeLimits, SessionCaps, make_app, write_token_file

TOKEN = "test-token-" + "x" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MiB = 1024 * 1024


def idle_host() -> SessionHost:
    """A host that is never started: it answers health and unknown ids without tools."""
    return SessionHost(config=HostConfig(max_sessions=2, min_available_mb=0))


def app_for(**kwargs):
    kwargs.setdefault("token", TOKEN)
    return make_app(idle_host(), own_host=False, **kwargs)


@pytest.fixture(scope="module")
def server():
    """docs on, so that the docs' routes are in the route table too."""
    with BackgroundServer(app_for(docs=True)) as running:
        yield running


@pytest.fixture(autouse=True)
def no_token_in_env(monkeypatch, tmp_path):
    """No token leaks in from the machine: no variable, and an empty cache directory."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def run(coro):
    return asyncio.run(coro)


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "some-id", path)


# -- the token ------------------------------------------------------------------------------


def test_every_route_but_health_answers_401_without_the_token(server):
    """Every route of the app's route table (a route added later is covered by itself) and
    every method it takes, without a token, with a wrong one and with a malformed header."""
    routes = [
        (method, route.path)
        for route in server.app.routes
        for method in sorted(getattr(route, "methods", None) or ())
    ]
    paths = {path for _, path in routes}
    assert {
        "/sessions",
        "/sessions/{session_id}/step",
        "/sessions/{session_id}/turn",
        "/sessions/{session_id}",
        "/health",
        "/docs",
        "/redoc",
        "/openapi.json",
    } <= paths
    checked = []
    with httpx.Client(base_url=server.url) as client:
        for method, path in routes:
            if (method, path) == ("GET", "/health"):
                continue
            for headers, problem in (
                ({}, "missing bearer token"),
                ({"Authorization": "Bearer wrong-token"}, "invalid bearer token"),
                ({"Authorization": f"Basic {TOKEN}"}, "malformed Authorization"),
                ({"Authorization": "Bearer"}, "malformed Authorization"),
            ):
                response = client.request(method, concrete(path), headers=headers, json={})
                assert response.status_code == 401, (method, path, headers, response.text)
                assert response.headers["WWW-Authenticate"].startswith("Bearer"), (method, path)
                if method != "HEAD":
                    assert response.json()["error"] == "unauthorized"
                    assert problem in response.json()["detail"], (method, path)
                checked.append((method, path))
        health = client.get("/health")
        unknown_path = client.get("/no/such/route")
    assert len({p for _, p in checked}) == len(paths) - 1  # every path but /health was tried
    assert health.status_code == 200 and health.json()["sessions"] == 0
    assert unknown_path.status_code == 401  # the route table is not probed without the token


def test_the_right_token_passes(server):
    with httpx.Client(base_url=server.url, headers=AUTH) as client:
        missing = client.delete("/sessions/nope")
        docs = client.get("/openapi.json")
    assert missing.status_code == 404 and missing.json()["error"] == "unknown_session"
    assert docs.status_code == 200 and "/sessions" in docs.json()["paths"]


def test_the_client_takes_the_token_argument_then_the_environment_then_a_file(
    server, monkeypatch, tmp_path
):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")

    async def reaches_the_app(**kwargs) -> bool:
        """True: authorized (the unknown id is a 404); False: a 401."""
        async with HttpHost(server.url, **kwargs) as host:
            try:
                await host.close_session("nope")
            except UnknownSession:
                return True
            except Unauthorized:
                return False
        raise AssertionError("an unknown session id was closed")

    assert run(reaches_the_app(token=TOKEN))
    assert not run(reaches_the_app(token="wrong"))
    assert run(reaches_the_app(token_file=token_file))
    monkeypatch.setenv(TOKEN_ENV, "wrong")
    assert run(reaches_the_app(token=TOKEN))  # the argument over the environment
    assert not run(reaches_the_app(token_file=token_file))  # the environment over a file
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert run(reaches_the_app())
    monkeypatch.delenv(TOKEN_ENV)
    assert not run(reaches_the_app())  # nothing found: the default file does not exist
    default = default_token_file(server.port)
    assert default.is_relative_to(tmp_path / "cache")
    write_token_file(default, TOKEN)
    assert run(reaches_the_app())  # the server's default file for this port


def test_a_client_without_a_token_says_where_it_looked(server):
    async def main():
        async with HttpHost(server.url) as host:
            await host.step("nope", {"name": "sql", "arguments": {"query": "SELECT 1"}})

    with pytest.raises(Unauthorized, match=r"missing bearer token.*could not be read"):
        run(main())


def test_the_default_token_file_is_only_read_for_a_server_on_this_machine():
    write_token_file(default_token_file(8000), TOKEN)
    assert HttpHost("http://127.0.0.1:8000").token() == TOKEN
    assert HttpHost("http://localhost:8000").token() == TOKEN
    remote = HttpHost("http://10.0.0.5:8000")
    assert remote.token() is None and remote.token_file is None


def test_the_client_rereads_a_changed_token_file_after_a_401(server, tmp_path):
    """A server that restarted wrote a new token: one refused request, then the new one."""
    token_file = tmp_path / "token"
    token_file.write_text("old-token\n")

    async def main():
        async with HttpHost(server.url, token_file=token_file) as host:
            with pytest.raises(Unauthorized, match="invalid bearer token"):
                await host.close_session("nope")
            token_file.write_text(TOKEN + "\n")
            with pytest.raises(UnknownSession):  # past the token, on the retry
                await host.close_session("nope")
            return host.token()

    assert run(main()) == TOKEN


def test_the_token_file_is_created_private_and_exclusive(tmp_path, monkeypatch):
    created = []
    real_open = os.open

    def recording_open(path, flags, mode=0o777, *args, **kwargs):
        created.append((str(path), flags, mode))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    target = tmp_path / "elsewhere"
    target.write_text("not the token")
    path = tmp_path / "new" / "serve.token"
    path.parent.mkdir()
    path.symlink_to(target)  # a link planted at the path is replaced, not written through
    old_umask = os.umask(0)  # the mode must not depend on the umask
    try:
        write_token_file(path, "first")
        write_token_file(path, "second")  # a file left by an earlier run is replaced
    finally:
        os.umask(old_umask)
    assert path.read_text() == "second\n" and not path.is_symlink()
    assert target.read_text() == "not the token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [(_, flags, mode)] = {c for c in created if c[0] == str(path)}
    assert flags & os.O_CREAT and flags & os.O_EXCL and mode == 0o600
    fresh = tmp_path / "made" / "dir" / "t"
    write_token_file(fresh, "x")
    assert stat.S_IMODE(fresh.parent.stat().st_mode) == 0o700


# -- the body limit -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_timeouts():
    limits = ServeLimits(body_timeout=1.5, header_timeout=2.0, keep_alive_timeout=1.0)
    with BackgroundServer(app_for(limits=limits), limits) as running:
        yield running


def head(path: str, extra: str, token: str = TOKEN) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    ).encode()


def test_a_20_mb_content_length_is_413_before_the_body_is_read(small_timeouts):
    with small_timeouts.connect() as sock:
        sock.sendall(head("/sessions", f"Content-Length: {20 * 1000 * 1000}\r\n"))
        status, headers, body = read_response(sock)  # no body byte was sent
    assert status == 413 and headers["connection"] == "close"
    payload = json.loads(body)
    assert payload["error"] == "body_too_large" and str(4 * MiB) in payload["detail"]


def test_a_20_mb_body_sent_in_full_is_413(small_timeouts):
    with small_timeouts.connect() as sock:
        sock.sendall(head("/sessions", f"Content-Length: {20 * 1000 * 1000}\r\n"))

        def push() -> None:
            block = b"x" * MiB
            try:
                for _ in range(20):
                    sock.sendall(block)
            except OSError:  # the server closed the connection: what it should do
                pass

        sender = threading.Thread(target=push, daemon=True)
        sender.start()
        status, _, body = read_response(sock)
        sender.join(30)
    assert status == 413 and json.loads(body)["error"] == "body_too_large"


def test_a_chunked_body_is_counted_as_it_arrives(small_timeouts):
    block = b"x" * (64 * 1024)
    chunk = f"{len(block):x}\r\n".encode() + block + b"\r\n"
    with small_timeouts.connect() as sock:
        sock.sendall(head("/sessions", "Transfer-Encoding: chunked\r\n"))
        for _ in range(4 * MiB // len(block) + 1):  # one block past the limit, no last chunk
            sock.sendall(chunk)
        status, _, body = read_response(sock)
    assert status == 413 and json.loads(body)["error"] == "body_too_large"


def test_bodies_under_the_limit_reach_the_app_whole(small_timeouts):
    code = "x = 1\n" * (3 * MiB // 6)  # 3 MiB: a JSON body the app must parse in full
    call = json.dumps({"name": "python", "arguments": {"code": code}}).encode()
    chunks = b"".join(
        f"{len(call[i : i + 65536]):x}\r\n".encode() + call[i : i + 65536] + b"\r\n"
        for i in range(0, len(call), 65536)
    )
    headers = {**AUTH, "Content-Type": "application/json"}
    with httpx.Client(base_url=small_timeouts.url, headers=headers) as client:
        sized = client.post("/sessions/nope/step", content=call)
        chunked = client.post("/sessions/nope/step", content=iter([call]))
    with small_timeouts.connect() as sock:
        sock.sendall(head("/sessions/nope/step", "Transfer-Encoding: chunked\r\n"))
        sock.sendall(chunks + b"0\r\n\r\n")
        raw_status, _, raw_body = read_response(sock)
    # Parsed as a tool call and answered by the host: the body arrived in one piece.
    for status, payload in (
        (sized.status_code, sized.json()),
        (chunked.status_code, chunked.json()),
        (raw_status, json.loads(raw_body)),
    ):
        assert status == 404 and payload["error"] == "unknown_session"


def test_a_body_that_stops_arriving_is_408_after_the_body_timeout(small_timeouts):
    with small_timeouts.connect() as sock:
        sock.sendall(head("/sessions", "Content-Length: 100\r\n") + b'{"dataset": ')
        assert is_open(sock, 0.5)  # still waiting for the rest
        started = time.monotonic()
        status, headers, body = read_response(sock)
        waited = time.monotonic() - started
    assert status == 408 and json.loads(body)["error"] == "body_timeout"
    assert headers["connection"] == "close" and 0.5 <= waited < 5


def test_the_client_raises_request_too_large(tmp_path):
    limits = ServeLimits(max_body_bytes=1024)
    with BackgroundServer(app_for(limits=limits), limits) as running:

        async def main():
            async with HttpHost(running.url, token=TOKEN) as host:
                await host.turn("nope", [], content="y" * 4096)

        with pytest.raises(RequestTooLarge, match="at most 1024 bytes"):
            run(main())


# -- connection timeouts and the connection cap ---------------------------------------------


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(small_timeouts):
    with small_timeouts.connect() as sock:
        assert is_open(sock, 0.7)  # well before header_timeout=2
        waited = 0.7 + seconds_until_closed(sock, limit=10)
    assert 1.5 <= waited < 6


def test_a_partial_request_head_is_closed_after_the_header_timeout(small_timeouts):
    with small_timeouts.connect() as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n")  # no blank line: incomplete
        assert is_open(sock, 0.7)
        waited = 0.7 + seconds_until_closed(sock, limit=10)
    assert 1.5 <= waited < 6


def test_a_head_sent_a_byte_at_a_time_does_not_extend_the_deadline(small_timeouts):
    """Slowloris: activity does not reset the header timeout (uvicorn's keep-alive timer is
    cancelled by any byte)."""
    started = time.monotonic()
    with small_timeouts.connect() as sock:
        sent = 0
        try:
            for byte in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                sock.sendall(bytes([byte]))
                sent += 1
                time.sleep(0.1)
        except OSError:
            pass  # closed while we were still sending
        closed_after = time.monotonic() - started
        if sent >= 120:  # not closed while sending: it must be closed now
            closed_after += seconds_until_closed(sock, limit=10)
    assert 1.5 <= closed_after < 6


def test_a_complete_request_is_answered_and_an_idle_connection_closed_after_keep_alive(
    small_timeouts,
):
    with small_timeouts.connect() as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
        status, _, body = read_response(sock)
        assert status == 200 and json.loads(body)["sessions"] == 0
        assert is_open(sock, 0.3)  # keep_alive_timeout=1
        waited = 0.3 + seconds_until_closed(sock, limit=10)
    assert 0.7 <= waited < 4


def test_connections_beyond_the_cap_are_answered_503_and_closed():
    limits = ServeLimits(max_connections=3, header_timeout=30.0)
    with BackgroundServer(app_for(limits=limits), limits) as running:
        held = [running.connect() for _ in range(3)]
        try:
            time.sleep(0.3)
            with running.connect() as extra:
                status, _, body = read_response(extra)
                assert seconds_until_closed(extra, limit=5) < 5
            assert status == 503 and json.loads(body)["error"] == "too_many_connections"
            assert all(is_open(sock, 0.05) for sock in held)  # the cap closed only the extra
            held.pop().close()
            deadline = time.monotonic() + 10
            while True:  # the server sees the close a moment later
                with running.connect() as again:
                    again.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
                    status, _, _ = read_response(again)
                if status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert status == 200
        finally:
            for sock in held:
                sock.close()


# -- caps on what a client asks for ----------------------------------------------------------

CAPPED = [
    ({"max_tool_calls": 10**9}, "env_config.max_tool_calls=1000000000", 100),
    ({"max_turns": 101}, "env_config.max_turns=101", 100),
    (
        {"reward": {"parse": {"max_answer_chars": 2049}}},
        "env_config.reward.parse.max_answer_chars=2049",
        2048,
    ),
    (
        {"reward": {"parse": {"max_output_chars": 10**7}}},
        "env_config.reward.parse.max_output_chars=10000000",
        1_000_000,
    ),
    ({"reward": {"parse": {"max_answers": 17}}}, "env_config.reward.parse.max_answers=17", 16),
    (
        {"reward": {"parse": {"max_tool_calls": 500}}},
        "env_config.reward.parse.max_tool_calls=500",
        100,
    ),
]


@pytest.mark.parametrize(("env_config", "named", "cap"), CAPPED)
def test_each_budget_above_its_cap_is_422_naming_field_value_and_cap(
    server, env_config, named, cap
):
    with httpx.Client(base_url=server.url, headers=AUTH) as client:
        response = client.post(
            "/sessions", json={"dataset": "/nowhere", "episode": "e", "env_config": env_config}
        )
    assert response.status_code == 422
    assert response.json()["error"] == "over_cap"
    assert f"{named} is above this server's cap of {cap}" in response.json()["detail"]

    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            await host.open("/nowhere", "e", env_config=env_config)

    with pytest.raises(OverCap, match=re.escape(named)):
        run(main())


def test_caps_are_configurable_and_every_violation_is_named():
    caps = SessionCaps(max_tool_calls=5, max_turns=7)
    with (
        BackgroundServer(app_for(caps=caps)) as running,
        httpx.Client(base_url=running.url, headers=AUTH) as client,
    ):
        both = client.post(
            "/sessions",
            json={
                "dataset": "/nowhere",
                "episode": "e",
                "env_config": {"max_tool_calls": 6, "max_turns": 8},
            },
        )
        turn = client.post(
            "/sessions/nope/turn", json={"calls": [{"name": "sql"}] * 6, "content": None}
        )
        within = client.post(
            "/sessions/nope/turn", json={"calls": [{"name": "sql"}] * 5, "content": None}
        )
    detail = both.json()["detail"]
    assert both.status_code == 422
    assert "env_config.max_tool_calls=6 is above this server's cap of 5" in detail
    assert "env_config.max_turns=8 is above this server's cap of 7" in detail
    assert turn.status_code == 422 and turn.json()["error"] == "over_cap"
    assert "calls: 6 in one turn is above this server's cap of 5" in turn.json()["detail"]
    assert within.status_code == 404  # within the cap: on to the host


def test_a_client_chosen_session_id_is_bounded(server):
    with httpx.Client(base_url=server.url, headers=AUTH) as client:
        response = client.post(
            "/sessions", json={"dataset": "/nowhere", "episode": "e", "session_id": "s" * 257}
        )
    assert response.status_code == 422 and "session_id" in response.text


# -- the API docs ----------------------------------------------------------------------------


@pytest.mark.parametrize("docs", [False, True])
def test_the_api_docs_are_served_only_when_asked_for_and_behind_the_token(docs):
    with BackgroundServer(app_for(docs=docs)) as running, httpx.Client(base_url=running.url) as c:
        found = {p: c.get(p, headers=AUTH).status_code for p in DOC_PATHS}
        anonymous = {p: c.get(p).status_code for p in DOC_PATHS}
    assert found == dict.fromkeys(DOC_PATHS, 200 if docs else 404)
    assert anonymous == dict.fromkeys(DOC_PATHS, 401)


DOC_PATHS = ("/docs", "/redoc", "/openapi.json")
