"""Sessions over HTTP: a real uvicorn server on loopback (in a thread of the test process) with
real sandboxed tools on a small generated dataset, driven by :class:`HttpHost` (with the
server's bearer token) and by raw httpx where the status code and headers are the point. What
the server refuses is tested in test_serve_security.py."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _serve_support import BackgroundServer
from _training_support import small_dataset

from causaltrace.env import DatasetSource
from causaltrace.env.session import SUBMITTED
from causaltrace.errors import CausalTraceError
from causaltrace.serve import HostConfig, HostFull, SessionHost, UnknownSession
from causaltrace.serve.client import HttpHost, RequestTimedOut
from causaltrace.serve.host import OverCap
from causaltrace.serve.http import SessionCaps, make_app

EPISODE = "ads-trainsmoke-000000"
TOKEN = "http-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("serve_http") / "ds")


@pytest.fixture(scope="module")
def server(dataset) -> Iterator[BackgroundServer]:
    host = SessionHost(config=HostConfig(max_sessions=2, min_available_mb=0, wait_seconds=0))
    with BackgroundServer(make_app(host, token=TOKEN, request_timeout=60.0)) as running:
        yield running
    assert host.runtime is None, "the app's lifespan closes the host"


def run(coro):
    return asyncio.run(coro)


def answer(dataset: Path, episode: str) -> dict:
    label = DatasetSource(dataset).label(episode)
    return {"root_cause": label.cause, "slice": label.slice or ""}


def python(code: str) -> dict:
    return {"name": "python", "arguments": {"code": code}}


def test_import_causaltrace_does_not_load_the_web_stack():
    code = (
        "import sys, causaltrace, causaltrace.serve; "
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'httpx', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_full_episode_over_http(server, dataset):
    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            opened = await host.open(str(dataset), EPISODE)
            sid = opened["session_id"]
            assert "ALERT:" in opened["prompt"]
            assert {t["function"]["name"] for t in opened["tools"]} == {"sql", "python", "submit"}
            sql = await host.step(sid, {"name": "sql", "arguments": {"query": "SELECT 6*7 AS v"}})
            assert "42" in sql["observation"] and sql["reward"] == 0.0
            assert not sql["terminated"] and sql["info"]["tool_calls"] == 1
            await host.step(sid, python("x = 41"))
            [read] = await host.turn(sid, [python("print(x + 1)")], content="checking")
            assert read["observation"].strip() == "42"  # the namespace persists across calls
            done = await host.step(sid, {"name": "submit", "arguments": answer(dataset, EPISODE)})
            with pytest.raises(RuntimeError, match="is over"):  # 409 after the end
                await host.step(sid, python("x"))
            transcript = await host.close_session(sid)
            with pytest.raises(UnknownSession):
                await host.step(sid, python("x"))
            return done, transcript, await host.health()

    done, transcript, health = run(main())
    assert done["terminated"] and not done["truncated"]
    assert done["reward"] == pytest.approx(1.0)
    assert done["info"]["reason"] == "submitted" and done["info"]["reward"]["score"] == 1.0
    # The agent-facing observation says nothing about how it scored.
    assert done["observation"] == SUBMITTED
    assert "1.0" not in done["observation"] and "reward" not in done["observation"].lower()
    assert transcript["episode_id"] == EPISODE and transcript["tool_calls"] == 3
    assert transcript["result"]["reason"] == "submitted"
    tool_outputs = [m["content"] for m in transcript["messages"] if m["role"] == "tool"]
    assert tool_outputs[-1] == SUBMITTED and any("42" in t for t in tool_outputs)
    assert health["sessions"] == 0


def test_two_sessions_of_one_episode_do_not_share_python_state(server, dataset):
    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            a = (await host.open(str(dataset), EPISODE))["session_id"]
            b = (await host.open(str(dataset), EPISODE))["session_id"]
            try:
                await host.step(a, python("secret = 'only in a'"))
                seen_by_b = await host.step(b, python("print('secret' in globals())"))
                await host.step(b, python("secret = 'only in b'"))
                a_reads = await host.step(a, python("print(secret)"))
                return seen_by_b["observation"], a_reads["observation"]
            finally:
                await asyncio.gather(host.close_session(a), host.close_session(b))

    seen_by_b, a_reads = run(main())
    assert seen_by_b.strip() == "False" and a_reads.strip() == "only in a"


def test_a_full_host_answers_503_and_the_client_raises_host_full(server, dataset):
    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            ids = [(await host.open(str(dataset), EPISODE))["session_id"] for _ in range(2)]
            try:
                with pytest.raises(HostFull, match="max_sessions=2"):
                    await host.open(str(dataset), EPISODE)
                async with httpx.AsyncClient(base_url=server.url, headers=AUTH) as raw:
                    response = await raw.post(
                        "/sessions", json={"dataset": str(dataset), "episode": EPISODE}
                    )
                health = await host.health()
            finally:
                await host.close_session(ids.pop())
            reopened = await host.open(str(dataset), EPISODE)  # a freed slot is usable again
            await host.close_session(reopened["session_id"])
            await host.close_session(ids.pop())
            return response, health

    response, health = run(main())
    assert response.status_code == 503 and int(response.headers["Retry-After"]) >= 1
    assert response.json()["error"] == "host_full"
    assert health["sessions"] == 2 and health["max_sessions"] == 2 and health["refused"] >= 2


def test_unknown_sessions_are_404_and_unknown_session(server):
    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            with pytest.raises(UnknownSession, match="nope"):
                await host.step("nope", python("1"))
            with pytest.raises(UnknownSession):
                await host.turn("nope", [])
            with pytest.raises(UnknownSession):
                await host.close_session("nope")
        async with httpx.AsyncClient(base_url=server.url, headers=AUTH) as raw:
            return await raw.delete("/sessions/nope")

    response = run(main())
    assert response.status_code == 404 and response.json()["error"] == "unknown_session"


def test_bad_requests_name_what_is_wrong(server, dataset, tmp_path):
    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            with pytest.raises(CausalTraceError, match="no-such-episode") as bad_episode:
                await host.open(str(dataset), "no-such-episode")
            with pytest.raises(CausalTraceError, match="not a complete dataset"):
                await host.open(str(tmp_path), EPISODE)
            with pytest.raises(CausalTraceError, match="max_tool_kalls"):
                await host.open(str(dataset), EPISODE, env_config={"max_tool_kalls": 3})
            with pytest.raises(CausalTraceError, match="transcript_dir"):  # no remote file paths
                await host.open(str(dataset), EPISODE, env_config={"transcript_dir": "/tmp/x"})
            async with httpx.AsyncClient(base_url=server.url, headers=AUTH) as raw:
                missing = await raw.post("/sessions", json={"dataset": str(dataset)})
                status = (await raw.post("/sessions", json={"dataset": "x", "episode": "y"})).json()
            return bad_episode.value, missing, status, await host.health()

    error, missing, status, health = run(main())
    assert not isinstance(error, HostFull | UnknownSession)
    assert missing.status_code == 422  # FastAPI's validation error for a body without episode
    assert status["error"] == "bad_request"
    assert health["sessions"] == 0  # failed opens gave their slots back


def test_budgets_at_the_caps_open_a_working_session_and_above_are_refused(server, dataset):
    caps = SessionCaps()
    parse = {
        "max_answer_chars": caps.max_answer_chars,
        "max_output_chars": caps.max_output_chars,
        "max_answers": caps.max_answers,
        "max_tool_calls": caps.max_tool_calls,
    }
    at_caps = {
        "max_tool_calls": caps.max_tool_calls,
        "max_turns": caps.max_turns,
        "reward": {"parse": parse},
    }

    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            over = {**at_caps, "max_turns": caps.max_turns + 1}
            with pytest.raises(OverCap, match=f"max_turns={caps.max_turns + 1} is above"):
                await host.open(str(dataset), EPISODE, env_config=over)
            refused_health = await host.health()
            sid = (await host.open(str(dataset), EPISODE, env_config=at_caps))["session_id"]
            try:
                sql = await host.step(sid, {"name": "sql", "arguments": {"query": "SELECT 1"}})
                done = await host.step(
                    sid, {"name": "submit", "arguments": answer(dataset, EPISODE)}
                )
            finally:
                await host.close_session(sid)
            return refused_health, sql, done

    refused_health, sql, done = run(main())
    assert refused_health["sessions"] == 0  # a refused open holds no slot
    assert sql["info"]["tool_calls"] == 1 and not sql["terminated"]
    assert done["terminated"] and done["reward"] == pytest.approx(1.0)


def test_a_request_timeout_is_504_and_the_session_stays_usable(server, dataset):
    app = server.app

    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            sid = (await host.open(str(dataset), EPISODE))["session_id"]
            try:
                await host.step(sid, python("x = 1"))
                app.state.request_timeout = 1.0
                started = time.monotonic()
                try:
                    with pytest.raises(RequestTimedOut, match="session"):
                        await host.step(sid, python("import time; time.sleep(4); y = 2"))
                finally:
                    app.state.request_timeout = 60.0
                waited = time.monotonic() - started
                # The next call waits for the slow one, and sees its variables and x.
                after = await host.step(sid, python("print(x, y)"))
                return waited, after, await host.close_session(sid)
            except BaseException:
                await host.close_session(sid)
                raise

    waited, after, transcript = run(main())
    assert waited < 3.5  # answered at request_timeout, not at the end of the call
    assert after["observation"].strip() == "1 2" and after["info"]["tool_calls"] == 3
    assert [m["content"] for m in transcript["messages"] if m["role"] == "tool"][1] == (
        "(no output)"
    )  # the timed-out call's output is in the transcript


def test_idle_sessions_expire_on_the_server(dataset):
    # SessionHost.expire_idle counts idleness from the start of the last call, so one call
    # (here a first python call, which may wait for a worker) must stay under idle_seconds.
    config = HostConfig(max_sessions=2, min_available_mb=0, idle_seconds=3.0)
    host = SessionHost(config=config)
    app = make_app(host, token=TOKEN, expire_every=0.25)

    async def main(url: str):
        async with HttpHost(url, token=TOKEN) as client:
            kept = (await client.open(str(dataset), EPISODE))["session_id"]
            idle = (await client.open(str(dataset), EPISODE))["session_id"]
            for _ in range(18):  # keep one session busy for 4.5 s; leave the other alone
                await client.step(kept, python("1"))
                await asyncio.sleep(0.25)
            with pytest.raises(UnknownSession):
                await client.step(idle, python("1"))
            still = await client.step(kept, python("print('alive')"))
            health = await client.health()
            await client.close_session(kept)
            return still, health

    with BackgroundServer(app) as running:
        still, health = run(main(running.url))
    assert still["observation"].strip() == "alive" and health["sessions"] == 1


def test_serve_cli_rejects_bad_options_in_one_line(capsys):
    from causaltrace.cli import main

    assert main(["serve", "--max-sessions", "0"]) == 2
    assert main(["serve", "--request-timeout", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "causaltrace: error: host config: max_sessions must be >= 1, not 0",
        "causaltrace: error: --request-timeout must be > 0, got 0.0",
    ]


@pytest.mark.parametrize("depth", [200_000, 900])
def test_a_deeply_nested_body_answers_no_5xx_and_the_session_goes_on(server, dataset, depth):
    """Issue 42, item 2: deeply nested JSON in a request answers no 5xx. Past the parser's
    recursion limit the body is refused (400) and does not count; within it, the call runs
    (the extra argument is ignored). Either way the session's next call runs."""

    DEPTH = depth

    async def main():
        async with HttpHost(server.url, token=TOKEN) as host:
            opened = await host.open(str(dataset), EPISODE)
            sid = opened["session_id"]
            deep = '{"name": "python", "arguments": {"code": "1", "x": ' + "[" * DEPTH
            deep += "]" * DEPTH + "}}"
            async with httpx.AsyncClient(base_url=server.url, headers=AUTH) as raw:
                answered = await raw.post(
                    f"/sessions/{sid}/step",
                    content=deep,
                    headers={"content-type": "application/json"},
                )
            after = await host.step(sid, {"name": "python", "arguments": {"code": "6 * 7"}})
            await host.close_session(sid)
            return answered, after

    answered, after = run(main())
    ran = depth < 1000
    assert answered.status_code == (200 if ran else 400), answered.text[:500]
    assert after["observation"] == "42" and after["info"]["tool_calls"] == 1 + ran
