"""The OpenEnv server and client, against ``openenv-core`` as installed (the openenv extra; it
skips without it). A real uvicorn server runs OpenEnv's own app (``create_app``) around the
environment, and OpenEnv's own clients drive it over the WebSocket: the typed
:class:`CausalTraceClient` (an ``EnvClient`` subclass) and the unmodified ``GenericEnvClient``.

openenv-core 0.3 is not in the dev extra (its gradio requirement caps pillow below 13, a
downgrade here): run these tests in an environment that has it, e.g. (docs/compatibility.md)

    python3 -m venv --system-site-packages /tmp/openenv-venv
    /tmp/openenv-venv/bin/pip install "openenv-core>=0.3,<0.4"
    /tmp/openenv-venv/bin/python -m pytest -q tests/serve/test_openenv.py
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest
from _integration_support import require_integration

# ruff: noqa: E402 (openenv is imported once the check below has skipped or failed without it)
require_integration("openenv", "openenv")  # skips without it; fails where a run requires it

import httpx
import uvicorn
from openenv.core.env_client import EnvClient
from openenv.core.env_server.interfaces import Environment
from openenv.core.generic_client import GenericEnvClient

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.scoring import score_output
from causaltrace.serve.openenv_env import (
    CausalTraceAction,
    CausalTraceClient,
    CausalTraceEnvironment,
    CausalTraceObservation,
    CausalTraceState,
    create_causaltrace_app,
)

REPO = Path(__file__).resolve().parents[2]
ADS_TEST = REPO / "data" / "ads_test"
MAX_TOOL_CALLS = 3
OBSERVATION_KEYS = {
    "text",
    "episode_id",
    "tools",
    "tool_calls",
    "turns",
    "truncated",
    "reward_breakdown",
}  # on the wire (OpenEnv sends done and reward beside them and drops metadata)
STATE_KEYS = {
    "episode_id",
    "step_count",
    "session_id",
    "dataset",
    "tool_calls",
    "turns",
    "max_tool_calls",
    "max_turns",
    "done",
}


def sliced_episode(source: DatasetSource) -> str:
    """An episode with a 2D slice whose text (``dim=level&dim=level``) the prompt does not
    contain: if it reached an observation, it would have come from the label."""
    for episode in source.episode_ids:
        label = source.label(episode)
        if label.slice and "&" in label.slice and label.slice not in source.prompt(episode):
            return episode
    raise AssertionError("ads_test has no 2D-sliced episode")


TOKEN = "openenv-test-token"


def serve(app):
    """``app`` served by uvicorn on 127.0.0.1 (an OS-chosen port) in a daemon thread: yields
    its URL, then stops it."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, name="openenv-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    port = uv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    uv.should_exit = True
    thread.join(timeout=60)
    assert app.state.causaltrace_backend.host.runtime is None  # closed on shutdown


def openenv_app(tmp_path_factory, **auth):
    """OpenEnv's app around ads_test (``auth``: its token, or insecure)."""
    return create_causaltrace_app(
        ADS_TEST,
        env_config={"max_tool_calls": MAX_TOOL_CALLS},
        cache_dir=tmp_path_factory.mktemp("openenv-episodes"),
        **auth,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """OpenEnv's app behind its bearer token; the host's sandbox starts with the first
    episode."""
    app = openenv_app(tmp_path_factory, token=TOKEN)
    for url in serve(app):
        yield app, url


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """The same app with ``insecure=True``, for OpenEnv's unmodified ``GenericEnvClient``
    (which sends no headers)."""
    app = openenv_app(tmp_path_factory, insecure=True)
    for url in serve(app):
        yield app, url


def client(url: str) -> CausalTraceClient:
    return CausalTraceClient(base_url=url, token=TOKEN)


def run(coro):
    return asyncio.run(coro)


def test_the_classes_are_openenvs():
    assert issubclass(CausalTraceEnvironment, Environment)
    assert issubclass(CausalTraceClient, EnvClient)
    assert set(CausalTraceObservation.model_fields) == OBSERVATION_KEYS | {
        "done",
        "reward",
        "metadata",
    }
    assert set(CausalTraceState.model_fields) == STATE_KEYS


def test_schema_and_metadata_endpoints(server):
    _, url = server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    schema = httpx.get(f"{url}/schema", headers=auth, timeout=30).json()
    assert {"name", "arguments"} <= set(schema["action"]["properties"])
    assert set(schema["observation"]["properties"]) >= OBSERVATION_KEYS
    # OpenEnv 0.3's /schema always describes its base State (create_app takes no state class).
    assert set(schema["state"]["properties"]) <= STATE_KEYS
    assert httpx.get(f"{url}/metadata", headers=auth, timeout=30).json()["name"] == "causaltrace"


@pytest.mark.sandbox
def test_a_scored_episode_with_the_typed_client(server):
    """reset -> sql -> submit through OpenEnv's EnvClient; each submit's reward equals the
    reward computed independently by causaltrace.scoring for the same answer and label."""
    _, url = server
    source = DatasetSource(ADS_TEST)
    episode = sliced_episode(source)
    label = source.label(episode)
    dims = label.slice.split("&")
    answers = [
        {"root_cause": label.cause, "slice": label.slice},  # right: the maximum
        {"root_cause": label.cause, "slice": dims[0]},  # right cause, half the slice: partial
        {"root_cause": next(c for c in source.answer_space.causes if c != label.cause)},
    ]

    async def episode_with(answer):
        async with client(url) as env:
            result = await env.reset(episode_id=episode)
            obs = result.observation
            assert isinstance(obs, CausalTraceObservation) and not result.done
            assert obs.text == source.prompt(episode) and obs.episode_id == episode
            assert obs.tools == ToolContract.for_dataset(ADS_TEST).openai()
            result = await env.step(
                CausalTraceAction(name="sql", arguments={"query": "SELECT count(*) FROM campaigns"})
            )
            assert "(1 row)" in result.observation.text and result.reward == 0.0
            assert not result.done and result.observation.tool_calls == 1
            state = await env.state()
            assert (state.episode_id, state.step_count, state.tool_calls) == (episode, 1, 1)
            result = await env.step(CausalTraceAction(name="submit", arguments=answer))
            state = await env.state()
            return result, state

    scores = []
    for answer in answers:
        result, state = run(episode_with(answer))
        expected = score_output(
            {"name": "submit", "arguments": answer},
            label,
            source.answer_space,
            tool_calls=1,
            turns=2,
        )
        assert result.done and not result.observation.truncated and state.done
        assert result.reward == pytest.approx(expected.score)
        assert result.observation.reward_breakdown == pytest.approx(expected.to_dict())
        assert result.observation.text == "Submission received. The episode is over."
        scores.append(result.reward)
    assert scores[0] == pytest.approx(1.0) and 0.05 < scores[1] < 1.0
    assert scores[2] == pytest.approx(0.05)


@pytest.mark.sandbox
def test_labels_never_reach_observations_or_state(open_server):
    """What crosses the wire, read by OpenEnv's unmodified GenericEnvClient: only the declared
    keys, and neither the label's slice (absent from this episode's prompt) nor, outside the
    prompt and the tool schemas (which list every cause), its cause."""
    _, url = open_server
    source = DatasetSource(ADS_TEST)
    episode = sliced_episode(source)
    label = source.label(episode)
    hidden = set(label.to_dict()) - {"episode_id"}

    async def go():
        seen = []
        async with GenericEnvClient(base_url=url) as env:
            reset = await env.reset(episode_id=episode)
            seen.append(("reset", reset.observation, await env.state()))
            step = await env.step(
                {"name": "sql", "arguments": {"query": "SELECT * FROM campaigns LIMIT 3"}}
            )
            seen.append(("sql", step.observation, await env.state()))
            step = await env.step({"name": "python", "arguments": {"code": "print(1 + 1)"}})
            seen.append(("python", step.observation, await env.state()))
        return seen

    for where, observation, state in run(go()):
        assert set(observation) == OBSERVATION_KEYS, where
        assert set(state) == STATE_KEYS, where
        wire = json.dumps([observation, state])
        assert label.slice not in wire, where
        rest = {k: v for k, v in observation.items() if k not in ("text", "tools")}
        assert label.cause not in json.dumps([rest, state]), where
        assert not hidden & (set(observation) | set(state)), where


@pytest.mark.sandbox
def test_two_sessions_are_isolated(server):
    """Two WebSocket sessions on the same episode at once: separate Python namespaces, counts
    and host sessions."""
    _, url = server
    episode = "test-000012"

    async def go():
        async with (
            client(url) as first,
            client(url) as second,
        ):
            await asyncio.gather(first.reset(episode_id=episode), second.reset(episode_id=episode))
            await first.step(CausalTraceAction(name="python", arguments={"code": "secret = 41"}))
            absent = await second.step(
                CausalTraceAction(name="python", arguments={"code": "print(secret)"})
            )
            present = await first.step(
                CausalTraceAction(name="python", arguments={"code": "print(secret + 1)"})
            )
            return absent, present, await first.state(), await second.state()

    absent, present, first, second = run(go())
    assert "NameError" in absent.observation.text
    assert present.observation.text.strip() == "42"
    assert first.session_id != second.session_id
    assert (first.tool_calls, second.tool_calls) == (2, 1)


@pytest.mark.sandbox
def test_the_budget_is_the_sessions(server):
    """The tool-call budget of the app's EnvConfig ends the episode (truncated, no attribution
    reward); a step after the end is an error the client raises."""
    _, url = server

    async def go():
        async with client(url) as env:
            await env.reset(seed=12)
            sql = CausalTraceAction(name="sql", arguments={"query": "SELECT 1"})
            results = [await env.step(sql) for _ in range(MAX_TOOL_CALLS + 1)]
            with pytest.raises(RuntimeError, match="no open episode"):
                await env.step(sql)
            return results, await env.state()

    results, state = run(go())
    assert not any(r.done for r in results[:-1])
    last = results[-1]
    assert last.done and last.observation.truncated and last.reward == 0.0
    assert "budget" in last.observation.text and state.done
    assert state.tool_calls == MAX_TOOL_CALLS and state.max_tool_calls == MAX_TOOL_CALLS


@pytest.mark.sandbox
def test_the_environment_in_process(server):
    """The blocking methods (OpenEnv calls them from its executor threads when an environment
    has no async ones), on the app's backend without the server."""
    app, _ = server
    env = CausalTraceEnvironment(app.state.causaltrace_backend)
    try:
        obs = env.reset(seed=12)
        assert obs.episode_id == "test-000012" and obs.reward is None and not obs.done
        obs = env.step(CausalTraceAction(name="submit", arguments={"root_cause": "BUDGET_CAP"}))
        assert obs.done and obs.reward == pytest.approx(1.0)
        assert obs.metadata == {"reason": "submitted"}
        assert env.state.done and env.state.session_id is not None
    finally:
        env.close()


def test_the_app_needs_a_token_or_says_insecure():
    """No token and no ``insecure``: a clear error before anything is served (issue 42 item 4:
    an open app let any client on the host play episodes and read their rewards)."""
    from causaltrace.errors import CausalTraceError

    with pytest.raises(CausalTraceError, match="needs a bearer token"):
        create_causaltrace_app(ADS_TEST)


def test_without_the_token_no_session_is_opened(server):
    """OpenEnv's own clients and plain HTTP, without the token or with a wrong one: the
    WebSocket handshake is closed before a session exists, HTTP routes answer 401, and
    ``/health`` stays public; with the token the same client plays."""
    _, url = server
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    assert httpx.get(f"{url}/schema", timeout=30).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.post(f"{url}/reset", json={}, headers=wrong, timeout=30).status_code == 401

    async def refused(env):
        with pytest.raises(ConnectionError):
            async with env:
                await env.reset(seed=12)

    run(refused(GenericEnvClient(base_url=url)))
    run(refused(CausalTraceClient(base_url=url, token="nope")))

    async def plays():
        async with client(url) as env:
            return await env.reset(seed=12)

    assert run(plays()).observation.episode_id
