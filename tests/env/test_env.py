"""The environment: Gym-style stepping, budgets, scoring on submit, transcripts and
concurrency, on a small generated dataset with real sandboxed tools (the TRL and verl adapters
are tested against the real trainers in test_trainer_trl.py and test_trainer_verl.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from causaltrace.datasets.generation import Job, run
from causaltrace.env import DatasetSource, DiagnosisSession, EnvConfig
from causaltrace.env.gym import DiagnosisEnv
from causaltrace.tools import ToolConfig, ToolRuntime

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("env") / "ds"
    job = Job.from_config(
        {
            "out_dir": str(out),
            "domain": {"name": "ads", "preset": "small"},
            "dataset": {
                "name": "envtest",
                "split": "envtest",
                "seed": 5,
                "n_episodes": 6,
                "composition": {"kind": "quotas", "total": 6, "sliced": 4, "two_d": 1},
                "shard_size": 3,
                "max_attempts": 400,  # as the committed splits allow
            },
        }
    )
    run(job, show_progress=False)
    return out


def correct_answer(source: DatasetSource, episode: str) -> dict:
    label = source.label(episode)
    return {"root_cause": label.cause, "slice": label.slice or ""}


def test_gym_episode_scores_the_right_answer(dataset):
    with DiagnosisEnv(dataset) as env:
        prompt, info = env.reset(options={"episode": "ads-envtest-000002"})
        assert "ALERT:" in prompt and {t["function"]["name"] for t in info["tools"]} == {
            "sql",
            "python",
            "submit",
        }
        obs, reward, terminated, truncated, _ = env.step(
            {"name": "sql", "arguments": '{"query": "SELECT count(*) AS n FROM campaigns"}'}
        )
        assert "4" in obs and reward == 0.0 and not terminated and not truncated
        obs, *_ = env.step({"name": "python", "arguments": {"code": "n = len(creatives)"}})
        obs, *_ = env.step({"name": "python", "arguments": {"code": "print(n * 10)"}})
        # 4 campaigns x (2 ads + an old paused one): the namespace persists between calls
        assert obs.strip() == "120"
        answer = correct_answer(env.source, "ads-envtest-000002")
        obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": answer})
        assert terminated and not truncated and reward == pytest.approx(1.0)
        assert "reward" not in obs and "1.0" not in obs  # the agent is not told its score
        assert info["reward"]["full_attribution"] == 1.0 and info["tool_calls"] == 3


def test_wrong_answer_and_malformed_calls(dataset):
    with DiagnosisEnv(dataset) as env:
        env.reset(seed=1)
        obs, *_ = env.step({"name": "sql", "arguments": "{not json"})
        assert "not valid JSON" in obs
        obs, *_ = env.step({"name": "shell", "arguments": "{}"})
        assert "unknown tool" in obs
        obs, *_ = env.step({"name": "python", "arguments": {"code": "1/0"}})
        assert "ZeroDivisionError" in obs
        _, reward, terminated, _, info = env.step(
            {"name": "submit", "arguments": {"root_cause": "NOT_A_CAUSE", "slice": ""}}
        )
        assert terminated and reward == 0.0 and info["parse_error"]


def test_a_malformed_submit_is_answered_and_retried_when_the_reward_says_so(dataset):
    """With parse.retry_malformed_submit the agent reads the named error, the call costs a unit
    of the budget, and the next valid submit is scored (the penalty term counts the retry);
    the transcript's scoring from outside (compute_score's parser) agrees."""
    reward = {
        "terms": {"full_attribution": 1.0, "malformed_submit": 0.1},
        "parse": {"retry_malformed_submit": True},
    }
    with DiagnosisEnv(dataset, EnvConfig(max_tool_calls=3, reward=reward)) as env:
        env.reset(options={"episode": "ads-envtest-000002"})
        answer = correct_answer(env.source, "ads-envtest-000002")
        bad = {"root_cause": answer["root_cause"], "slice": "device=toaster"}
        obs, reward_now, terminated, truncated, info = env.step(
            {"name": "submit", "arguments": bad}
        )
        assert not terminated and not truncated and reward_now == 0.0
        assert obs.startswith("Error: the submission was not accepted") and "toaster" in obs
        assert info["tool_calls"] == 1
        obs, score, terminated, _, info = env.step({"name": "submit", "arguments": answer})
        assert terminated and score == pytest.approx(0.9)
        assert info["reward"]["malformed_submit"] == -1.0
    # Without retries the first (malformed) submit ends the episode, as before.
    with DiagnosisEnv(dataset, EnvConfig(max_tool_calls=3)) as env:
        env.reset(options={"episode": "ads-envtest-000002"})
        _, score, terminated, _, info = env.step({"name": "submit", "arguments": bad})
        assert terminated and score == 0.0 and "toaster" in info["parse_error"]


def test_retries_of_a_malformed_submit_stop_at_the_budget(dataset):
    reward = {"parse": {"retry_malformed_submit": True}}
    with DiagnosisEnv(dataset, EnvConfig(max_tool_calls=2, reward=reward)) as env:
        env.reset(options={"episode": "ads-envtest-000002"})
        bad = {"root_cause": "NOT_A_CAUSE"}
        for _ in range(2):
            _, _, terminated, truncated, _ = env.step({"name": "submit", "arguments": bad})
            assert not terminated and not truncated
        obs, score, terminated, truncated, _ = env.step({"name": "submit", "arguments": bad})
        assert truncated and not terminated and score == 0.0 and "budget" in obs


def test_tool_call_budget_truncates_with_no_attribution(dataset):
    with DiagnosisEnv(dataset, EnvConfig(max_tool_calls=2)) as env:
        env.reset(seed=0)
        for _ in range(2):
            env.step({"name": "sql", "arguments": {"query": "SELECT 1"}})
        obs, reward, terminated, truncated, info = env.step(
            {"name": "sql", "arguments": {"query": "SELECT 1"}}
        )
        assert truncated and not terminated and "budget" in obs and reward == 0.0
        assert info["reward"]["full_attribution"] == 0.0 and info["reward"]["format"] == 0.0


def test_turn_budget(dataset):
    with DiagnosisEnv(dataset, EnvConfig(max_turns=2)) as env:
        env.reset(seed=0)
        env.step({"name": "sql", "arguments": {"query": "SELECT 1"}})
        *_, truncated, info = env.step({"name": "sql", "arguments": {"query": "SELECT 1"}})
        assert truncated and info["reason"] == "turn budget exhausted"


WALK_FOR_PRIVATE_FILES = """
import os
walked, found = 0, []
for d, dirs, files in os.walk('/'):
    dirs[:] = [x for x in dirs if not (d == '/' and x in ('proc', 'sys'))]
    walked += len(files)
    found += [os.path.join(d, f) for f in files if f.startswith('shard-') or f.endswith('.jsonl')]
    found += [os.path.join(d, x) for x in dirs if os.path.isdir(os.path.join(d, x, 'labels'))]
print(walked, found)
"""


def test_labels_and_private_files_never_reach_the_tools(dataset):
    source = DatasetSource(dataset)
    label_text = "".join(p.read_text() for p in (dataset / "private" / "labels").iterdir())
    with DiagnosisEnv(source) as env:
        env.reset(options={"episode": "ads-envtest-000001"})
        probes = [
            {"name": "python", "arguments": {"code": "import os; print(os.listdir('/'))"}},
            {  # walk the whole file system the sandbox sees (os.walk: 0.4 s for ~140k files;
                # a recursive glob follows the /usr symlinks several times and takes minutes)
                "name": "python",
                "arguments": {"code": WALK_FOR_PRIVATE_FILES},
            },
            {
                "name": "python",
                "arguments": {"code": "print(open('../private/labels/shard-00000.jsonl').read())"},
            },
            {
                "name": "sql",
                "arguments": {
                    "query": "SELECT * FROM read_text('"
                    + str(dataset / "private/labels/shard-00000.jsonl")
                    + "')"
                },
            },
        ]
        outputs = [env.step(p)[0] for p in probes]
    label = source.label("ads-envtest-000001")
    walked, found = outputs[1].strip().split(" ", 1)
    assert int(walked) > 1000 and found == "[]"  # the walk ran; nothing of private/ is there
    for out in outputs:
        assert '"effect_in_slice"' not in out and '"strength"' not in out
        assert str(label.strength) not in out
    assert label.cause in label_text  # the labels exist on the host, just not for the agent


def test_transcript_is_written_and_replayable(dataset, tmp_path):
    config = EnvConfig(transcript_dir=str(tmp_path))
    source = DatasetSource(dataset)
    with DiagnosisEnv(source, config) as env:
        env.reset(options={"episode": "ads-envtest-000004"})
        env.step({"name": "sql", "arguments": {"query": "SELECT count(*) FROM creatives"}})
        env.step({"name": "submit", "arguments": correct_answer(source, "ads-envtest-000004")})
        env.reset(options={"episode": "ads-envtest-000005"})  # closes (and writes) the first one
    lines = [
        json.loads(x) for x in (tmp_path / "ads-envtest-000004.jsonl").read_text().splitlines()
    ]
    meta, messages = lines[0], lines[1:]
    assert meta["type"] == "meta" and meta["result"]["reward"]["score"] == pytest.approx(1.0)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    # Replaying the recorded tool calls in a fresh environment gives the same observations.
    with DiagnosisEnv(source) as env:
        env.reset(options={"episode": "ads-envtest-000004"})
        call = messages[1]["tool_calls"][0]["function"]
        obs, *_ = env.step({"name": call["name"], "arguments": call["arguments"]})
        assert obs == messages[2]["content"]


def test_many_episodes_concurrently_in_one_loop(dataset):
    source = DatasetSource(dataset)

    async def one(runtime, episode):
        async with DiagnosisSession(runtime, source, episode) as session:
            await session.step({"name": "python", "arguments": {"code": "x = 1"}})
            result = await session.step(
                {"name": "submit", "arguments": correct_answer(source, episode)}
            )
            return result.reward

    async def main():
        async with ToolRuntime(ToolConfig()) as runtime:
            return await asyncio.gather(*(one(runtime, e) for e in source.episode_ids))

    rewards = asyncio.run(main())
    assert rewards == pytest.approx([1.0] * len(source.episode_ids))


def test_random_agent_runs_through_the_session(dataset):
    from causaltrace.agents import make_agent

    source = DatasetSource(dataset)
    agent = make_agent("random")

    async def main():
        async with (
            ToolRuntime(ToolConfig()) as runtime,
            DiagnosisSession(runtime, source, "ads-envtest-000000") as session,
        ):
            await agent.run(session, np.random.default_rng(0))
            return session.done, session.result

    done, result = asyncio.run(main())
    assert done and result["reason"] == "submitted" and result["parse_error"] is None
