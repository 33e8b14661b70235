"""The ORS environment (causaltrace.serve.ors_env), served by the ``openreward`` SDK's own
``Server`` and driven by its own client (``AsyncOpenReward().environments.get(name,
base_url=...)``), against the SDK as installed (the ors extra; it skips without it; its pins
would change this environment's packages, so ``tests/install/test_isolated_integrations.py``
runs it in a venv of its own):

    python3 -m venv --system-site-packages /tmp/ors-venv
    /tmp/ors-venv/bin/pip install "openreward==0.1.167"
    /tmp/ors-venv/bin/python -m pytest -q tests/serve/test_ors.py
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from _integration_support import require_integration

# ruff: noqa: E402 (openreward is imported once the check below has skipped or failed without it)
require_integration("openreward", "ors")

from openreward import AsyncOpenReward
from openreward.api.errors import ToolCallError

from causaltrace.env import DatasetSource
from causaltrace.scoring import score_output

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "data" / "ads_test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    command = [sys.executable, "-m", "causaltrace.serve.ors_env", "--split", f"test={DATASET}"]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                break
        except OSError:
            if process.poll() is not None:
                pytest.fail(f"the ORS server exited: {process.stderr.read()[-2000:]}")
            time.sleep(0.3)
    else:
        process.kill()
        pytest.fail("the ORS server did not answer /health within 90 s")
    yield url
    process.terminate()
    process.wait(timeout=30)


async def _drive(url: str):
    source = DatasetSource(DATASET)
    episode = source.episode_ids[0]
    label, space = source.label(episode), source.answer_space
    right = {"root_cause": label.cause, "slice": label.slice or ""}
    wrong = {"root_cause": next(c for c in space.causes if c != label.cause), "slice": ""}
    client = AsyncOpenReward(api_key="local")
    env = client.environments.get("causaltrace", base_url=url)
    found: dict = {"splits": await env.list_splits(), "tasks": await env.list_tasks("test")}
    task = next(t for t in found["tasks"] if t.task_spec["episode_id"] == episode)
    async with env.session(task=task) as one, env.session(task=task) as two:
        found["prompt"] = (await one.get_prompt())[0].text
        found["tools"] = sorted(t.name for t in await one.list_tools())
        found["sql"] = await one.call_tool("sql", {"query": "SELECT count(*) AS n FROM perf_daily"})
        await one.call_tool("python", {"code": "mine = 7"})
        found["persists"] = await one.call_tool("python", {"code": "print(mine * 6)"})
        found["isolated"] = await two.call_tool("python", {"code": "print('mine' in dir())"})
        found["right"] = await one.call_tool("submit", right)
        found["wrong"] = await two.call_tool("submit", wrong)
        with pytest.raises(ToolCallError, match="episode_finished"):
            await one.call_tool("sql", {"query": "SELECT 1"})
    await client.environments.aclose()
    return found, source, episode, right, wrong


def test_an_ors_client_runs_an_episode_to_its_reward(server):
    found, source, episode, _, wrong = asyncio.run(_drive(server))
    label, space = source.label(episode), source.answer_space
    assert found["splits"] == ["test"]
    specs = [t.task_spec for t in found["tasks"]]
    assert specs == [{"split": "test", "episode_id": e} for e in source.episode_ids]
    assert found["prompt"] == source.prompt(episode)
    assert found["tools"] == ["python", "sql", "submit"]
    assert "76608" in found["sql"].blocks[0].text or found["sql"].blocks[0].text.count("\n") >= 2
    assert not found["sql"].finished and found["sql"].reward is None
    assert found["persists"].blocks[0].text.strip() == "42"
    assert found["isolated"].blocks[0].text.strip() == "False"  # its own namespace
    assert found["right"].finished and found["right"].reward == pytest.approx(1.0)
    assert found["wrong"].finished
    assert found["wrong"].reward == pytest.approx(score_output(wrong, label, space).score)
    assert found["wrong"].reward < found["right"].reward
    # The label is in no task, prompt or tool output the client received.
    seen = json.dumps(specs) + found["prompt"] + found["sql"].blocks[0].text
    assert label.slice is None or label.slice not in seen.replace(source.prompt(episode), "")
