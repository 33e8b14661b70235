"""The ART rollout against ``openpipe-art`` as installed (the art extra; it skips without it, and
fails instead under ``CAUSALTRACE_REQUIRE_INTEGRATION=art``). A scripted OpenAI-compatible
server (tests/_openai_stub.py) plays the model; the official ``openai`` client that ART uses
talks to it; the trajectories are ART's own ``Trajectory`` objects, gathered into
``TrajectoryGroup``s by ART's ``gather_trajectory_groups`` and tokenized by ART's training
preprocessing with a locally built Qwen2.5-template tokenizer.

openpipe-art 0.5 needs ``graphql-core>=3.3`` (through weave and gql), above what the main
environment holds, so it is not in the dev extra; run these tests in a virtual environment that
has it (docs/compatibility.md):

    python3 -m venv --system-site-packages /tmp/art-venv
    /tmp/art-venv/bin/pip install "openpipe-art>=0.5.18,<0.6"
    /tmp/art-venv/bin/python -m pytest -q tests/training/test_art_rollout.py
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from pathlib import Path

import pytest
from _integration_support import require_integration

# litellm (imported by art) fetches a model price list from the network on import unless told
# to use its bundled copy; the tests run offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


art = require_integration("art", "art")

from _openai_stub import StubServer, call, completion, turn_of  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from openai.types.chat.chat_completion import Choice  # noqa: E402

import causaltrace.training.art_rollout as art_rollout  # noqa: E402
from causaltrace.datasets.reading import DatasetSource  # noqa: E402
from causaltrace.env.contract import ToolContract  # noqa: E402
from causaltrace.errors import CausalTraceError  # noqa: E402
from causaltrace.scoring import TRACE_WEIGHTS, score_output  # noqa: E402
from causaltrace.training.host_loop import HostLoop  # noqa: E402
from causaltrace.training.records import RL_RULES  # noqa: E402

REPO = Path(art_rollout.__file__).resolve().parents[2]
ADS_TEST = REPO / "data" / "ads_test"
EPISODE = "test-000012"
MAX_REWARD = math.fsum(TRACE_WEIGHTS.values())  # TRACE's maximum: 1.0
SQL = {"query": "SELECT count(*) AS n FROM campaigns"}

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    return DatasetSource(ADS_TEST)


@pytest.fixture(scope="module", autouse=True)
def _close_hosts():
    yield
    HostLoop.get().close_hosts()


def scripted(script: dict[str, list]) -> StubServer:
    """A model server that answers each model name's n-th request with ``script[model][n]``
    (a completion body, or a callable that returns one)."""

    def handler(request: dict) -> dict:
        step = script[request["model"]][turn_of(request)]
        return step(request) if callable(step) else step

    return StubServer(handler)


def client(server: StubServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key="stub", max_retries=0)


def submit(label, cause: str | None = None) -> dict:
    return {"root_cause": cause or label.cause, "slice": "" if cause else (label.slice or "")}


def test_scenarios_and_bad_arguments(source):
    found = art_rollout.scenarios(ADS_TEST)
    assert len(found) == len(source.episode_ids)
    assert found[12] == art_rollout.Scenario(str(ADS_TEST), EPISODE)
    assert found[12].id == f"ads_test/{EPISODE}"
    assert art_rollout.Scenario.of({"episode_id": EPISODE, "dataset": ADS_TEST}) == found[12]
    with pytest.raises(CausalTraceError, match="episode id and a dataset"):
        art_rollout.Scenario.of(EPISODE)
    with pytest.raises(CausalTraceError, match="model="):
        asyncio.run(art_rollout.rollout(object(), found[12]))


def test_a_right_and_a_wrong_answer_score_as_causaltrace_scores_them(source):
    label, space = source.label(EPISODE), source.answer_space
    right, wrong = submit(label), submit(label, next(c for c in space.causes if c != label.cause))
    script = {
        "right": [
            completion("Counting campaigns first.", calls=[call("sql", SQL)]),
            completion(calls=[call("submit", right)]),
        ],
        "wrong": [completion(calls=[call("submit", wrong)])],
    }
    scenario = art_rollout.Scenario(str(ADS_TEST), EPISODE)
    with scripted(script) as server:

        async def both():
            api = client(server)
            return await asyncio.gather(
                art_rollout.rollout(api, scenario, model="right"),
                art_rollout.rollout(api, scenario, model="wrong"),
            )

        good, bad = asyncio.run(both())
        requests = list(server.requests)

    # what the model was offered: the contract's schemas, and logprobs (ART trains on them)
    first = next(r for r in requests if r["model"] == "right")
    assert first["tools"] == ToolContract.for_dataset(ADS_TEST).openai() == good.tools
    assert first["logprobs"] is True
    assert first["messages"] == [{"role": "user", "content": source.prompt(EPISODE)}]
    second = [r for r in requests if r["model"] == "right"][1]["messages"]
    assert second[2]["role"] == "tool" and "(1 row)" in second[2]["content"]
    assert second[2]["tool_call_id"] == second[1]["tool_calls"][0]["id"]

    assert isinstance(good, art.Trajectory) and isinstance(bad, art.Trajectory)
    assert good.reward == pytest.approx(MAX_REWARD)
    assert bad.reward == pytest.approx(TRACE_WEIGHTS["format"]) and bad.reward < MAX_REWARD
    # causaltrace's own scoring of the same answer, and of the same conversation
    rules = RL_RULES.env_reward()
    for trajectory, answer in ((good, right), (bad, wrong)):
        assert (
            trajectory.reward
            == score_output({"name": "submit", "arguments": answer}, label, space).score
        )
        assert trajectory.reward == score_output(trajectory.messages(), label, space, rules).score
    # the metrics hold the reward's terms and the counts; ART's metric types only
    assert good.metrics["score"] == good.reward and good.metrics["full_attribution"] == 1.0
    assert good.metrics["graded_attribution"] == 1.0 and good.metrics["format"] == 1.0
    assert bad.metrics["full_attribution"] == 0.0 and bad.metrics["format"] == 1.0
    assert good.metrics["tool_calls"] == 1.0 and good.metrics["truncated"] is False
    assert all(isinstance(v, float | int | bool) for v in good.metrics.values())
    assert good.metadata["episode_id"] == EPISODE and good.metadata["reason"] == "submitted"

    # The messages are ART's: the model's turns are the server's Choice objects (trainable),
    # the prompt and the tool outputs plain messages.
    kinds = [
        type(m).__name__ if isinstance(m, Choice) else m["role"] for m in good.messages_and_choices
    ]
    assert kinds == ["user", "Choice", "tool", "Choice", "tool"]
    group = art.TrajectoryGroup([good, bad], metadata={"scenario_id": scenario.id})
    assert len(group) == 2 and group.exceptions == []
    json.dumps(group.trajectories[0].for_logging(), default=str)  # ART's console logging


def with_logprobs(body: dict, tokenizer, text: str) -> dict:
    """A completion whose choice carries token logprobs, as vLLM returns them to ART
    (``token_id:<id>`` tokens): ``text`` as the tokenizer encodes it."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    body["choices"][0]["logprobs"] = {
        "content": [
            {
                "token": f"token_id:{i}",
                "logprob": -0.5,
                "bytes": list(tokenizer.decode([i]).encode()),
                "top_logprobs": [],
            }
            for i in ids
        ]
    }
    return body


def test_trajectory_groups_gather_and_tokenize_as_art_trains_on_them(source):
    """ART's own pipeline on the rollouts: ``TrajectoryGroup``s of rollout awaitables gathered
    by ``gather_trajectory_groups``, then ART's training tokenizer: the chat template rendered
    with the trajectory's tools, the model's tokens (its choices' logprobs) under the assistant
    mask, the prompt and tool outputs outside it."""
    tokenize = pytest.importorskip("art.preprocessing.tokenize")
    pytest.importorskip("trl")  # the tiny tokenizer takes TRL's Qwen2.5 template
    from causaltrace.training.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    label = source.label(EPISODE)
    said = {
        "agent": ["Count the campaigns first.", "It is the budget."],
        "lazy": ["Creative fatigue, surely."],
    }
    script = {
        "agent": [
            with_logprobs(
                completion(said["agent"][0], calls=[call("sql", SQL)]), tokenizer, said["agent"][0]
            ),
            with_logprobs(
                completion(said["agent"][1], calls=[call("submit", submit(label))]),
                tokenizer,
                said["agent"][1],
            ),
        ],
        "lazy": [
            with_logprobs(
                completion(
                    said["lazy"][0], calls=[call("submit", submit(label, "CREATIVE_FATIGUE"))]
                ),
                tokenizer,
                said["lazy"][0],
            )
        ],
    }
    scenario = art_rollout.Scenario(str(ADS_TEST), EPISODE)
    with scripted(script) as server:

        async def gather():
            api = client(server)
            return await art.gather_trajectory_groups(
                [
                    art.TrajectoryGroup(
                        (art_rollout.rollout(api, scenario, model=name) for name in said),
                        metadata={"scenario_id": scenario.id},
                    )
                ],
                pbar_desc=None,
            )

        (group,) = asyncio.run(gather())
    assert sorted(t.reward for t in group) == [TRACE_WEIGHTS["format"], MAX_REWARD]
    assert group.metadata == {"scenario_id": scenario.id} and group.exceptions == []
    results = list(
        tokenize.tokenize_trajectory_groups(
            tokenizer, [group], allow_training_without_logprobs=False, scale_rewards=True
        )
    )
    assert len(results) == 2  # one per trajectory (different rewards: no zero advantage)
    for result in results:
        name = "agent" if result.advantage > 0 else "lazy"
        trained = [t for t, m in zip(result.token_ids, result.assistant_mask) if m]
        assert tokenizer.decode(trained) == "".join(said[name])  # the model's tokens, exactly
        text = tokenizer.decode(result.token_ids)
        assert source.prompt(EPISODE)[:200] in text and "<tools>" in text
        assert '"name": "submit"' in text  # the tool calls, rendered by the template
        if name == "agent":
            assert "(1 row)" in text  # the tool output, as the model read it


def test_two_rollouts_on_one_episode_at_once_share_no_state(source):
    """Per-sample isolation: two rollouts of one episode at the same time, each in its own
    session (sandbox, Python namespace, budget). Both reach their second turn only after both
    ran their first, so the first one's variable exists while the second one looks for it."""
    label = source.label(EPISODE)
    barrier = threading.Barrier(2, timeout=60)

    def after_both(body: dict):
        def step(request: dict) -> dict:
            barrier.wait()
            return body

        return step

    script = {
        "a": [
            completion(calls=[call("python", {"code": "secret = 41"})]),
            after_both(completion(calls=[call("python", {"code": "print(secret + 1)"})])),
            completion(calls=[call("submit", submit(label))]),
        ],
        "b": [
            completion(calls=[call("python", {"code": "x = 1"})]),
            after_both(
                completion(calls=[call("python", {"code": "print('secret' in globals())"})])
            ),
            completion(calls=[call("submit", submit(label))]),
        ],
    }
    scenario = art_rollout.Scenario(str(ADS_TEST), EPISODE)
    with scripted(script) as server:

        async def both():
            api = client(server)
            return await asyncio.gather(
                art_rollout.rollout(api, scenario, model="a"),
                art_rollout.rollout(api, scenario, model="b"),
            )

        a, b = asyncio.run(both())
    outputs = {
        name: [m["content"].strip() for m in t.messages() if m["role"] == "tool"]
        for name, t in (("a", a), ("b", b))
    }
    assert outputs["a"][1] == "42" and outputs["b"][1] == "False"
    assert a.reward == b.reward == pytest.approx(MAX_REWARD)
    assert a.metrics["tool_calls"] == b.metrics["tool_calls"] == 2.0


def test_past_max_tool_calls_the_rollout_ends_with_zero(source):
    label = source.label(EPISODE)
    script = {
        "m": [
            completion(calls=[call("sql", SQL)]),
            completion(calls=[call("sql", SQL)]),
            completion(calls=[call("submit", submit(label))]),
        ]
    }
    with scripted(script) as server:
        trajectory = asyncio.run(
            art_rollout.rollout(
                client(server),
                {"episode_id": EPISODE, "dataset": str(ADS_TEST)},
                model="m",
                config={"max_tool_calls": 1},
            )
        )
        assert len(server.requests) == 2  # the second query ended the episode
    assert trajectory.reward == 0.0 and trajectory.metrics["truncated"] is True
    assert trajectory.metadata["reason"] == "tool-call budget exhausted"
    assert trajectory.metrics["full_attribution"] == 0.0
    last = trajectory.messages()[-1]
    assert last["role"] == "tool" and "budget" in last["content"]


def test_an_art_model_is_used_through_its_openai_client(source):
    """``rollout(model, scenario)`` with an ``art.Model`` (a prompted model pointed at the
    server): its ``openai_client()`` and inference name are used."""
    label = source.label(EPISODE)
    script = {"stub-model": [completion(calls=[call("submit", submit(label))])]}
    with scripted(script) as server:
        model = art.Model(
            name="stub-model",
            project="causaltrace-tests",
            inference_api_key="stub",
            inference_base_url=server.base_url,
        )
        scenario = art_rollout.scenarios(ADS_TEST, [EPISODE])[0]
        trajectory = asyncio.run(art_rollout.rollout(model, scenario))
    assert trajectory.reward == pytest.approx(MAX_REWARD)
