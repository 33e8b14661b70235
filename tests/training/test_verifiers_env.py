"""The Prime Intellect verifiers environment, against ``verifiers`` 0.4 as installed (the
verifiers extra; it skips without it). verifiers' own machinery runs every rollout: the
environment :func:`load_environment` returns (verifiers' ``SingleAgentEnv`` over the taskset),
``Env.serving`` (its interception server), ``Env.run_slot`` (its rollout: the ``null`` chat-loop
harness in a local subprocess runtime, one MCP tool server per rollout, the task's stop and
reward hooks). The model is a scripted OpenAI-compatible server on 127.0.0.1 that streams
(verifiers relays the harness's streamed requests upstream).

verifiers 0.4 requires openai < 3 and mcp 2.0, a downgrade of this environment's openai: run
these tests in an environment that has it, e.g. (docs/compatibility.md)

    python3 -m venv --system-site-packages /tmp/vf-venv
    /tmp/vf-venv/bin/pip install "verifiers>=0.4,<0.5" "uv>=0.5"
    PATH=/tmp/vf-venv/bin:$PATH /tmp/vf-venv/bin/python -m pytest -q tests/training/test_verifiers_env.py

or through ``tests/install/test_isolated_integrations.py``, which does that in a cached venv.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _integration_support import require_integration

# ruff: noqa: E402 (verifiers is imported once the check below has skipped or failed without it)
require_integration("verifiers", "verifiers")  # skips without it; fails where a run requires it

import verifiers.v1 as vf
from verifiers.v1.clients import EvalClientConfig, ModelContext
from verifiers.v1.utils.loaders import default_harness_id, taskset_class

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.scoring import score_output
from causaltrace.training.records import (
    LEAKY_METADATA_KEYS,
    RL_RULES,
    EpisodeRules,
    ground_truth_json,
)
from causaltrace.training.verifiers_env import (
    TASKSET_ID,
    CausalTraceHarness,
    CausalTraceTask,
    CausalTraceTaskset,
    completion_messages,
    load_environment,
)
from causaltrace.training.verl_reward import compute_score

REPO = Path(__file__).resolve().parents[2]
ADS_TEST = REPO / "data" / "ads_test"
BUDGET = 2  # the budget environment's tool-call budget
TIMEOUT = 300.0  # seconds: any one wait of the scripted model, any one rollout


# -- a scripted OpenAI-compatible model that streams -------------------------------------------
def call(name: str, index: int, **arguments: Any) -> dict[str, Any]:
    return {
        "id": f"call_{name}_{index}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _chunks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message as chat-completion stream chunks: the delta, the finish, the usage."""
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0}
    base["model"] = "scripted"
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    calls = message.get("tool_calls") or []
    if calls:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(calls)]
    finish = "tool_calls" if calls else "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**base, "choices": [], "usage": usage},
    ]


class ScriptedModel:
    """``POST /v1/chat/completions`` answered by ``script(request) -> assistant message``,
    streamed when the request asks for it; every request body is kept in ``requests``."""

    def __init__(self, script: Callable[[dict[str, Any]], dict[str, Any]]):
        self.script = script
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(request)
                message = model.script(request)
                if request.get("stream"):
                    events = [f"data: {json.dumps(c)}\n\n" for c in _chunks(message)]
                    body = ("".join(events) + "data: [DONE]\n\n").encode()
                    kind = "text/event-stream"
                else:
                    choice = {"index": 0, "message": {"role": "assistant", **message}}
                    choice["finish_reason"] = "tool_calls" if message.get("tool_calls") else "stop"
                    reply = {"id": "x", "object": "chat.completion", "created": 0}
                    body = json.dumps({**reply, "model": "scripted", "choices": [choice]}).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def turn_of(request: dict[str, Any]) -> int:
    return sum(m["role"] == "assistant" for m in request["messages"])


def prompt_of(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def hermes_text(completion: list[dict[str, Any]]) -> str:
    """A completion as a Hermes-template model writes it (Qwen's ChatML with ``<tool_call>``
    and ``<tool_response>`` blocks), as verl's ``compute_score`` receives a decoded response."""
    parts = []
    for m in completion:
        if m["role"] == "assistant":
            text = m.get("content") or ""
            for c in m.get("tool_calls") or []:
                fn = c["function"]
                payload = {"name": fn["name"], "arguments": json.loads(fn["arguments"])}
                text += f"<tool_call>\n{json.dumps(payload)}\n</tool_call>"
            parts.append(text + "<|im_end|>")
        else:
            parts.append(
                f"\n<|im_start|>user\n<tool_response>\n{m['content']}\n</tool_response>"
                "<|im_end|>\n<|im_start|>assistant\n"
            )
    return "".join(parts)


# -- the rollouts --------------------------------------------------------------------------------
def sliced_episodes(source: DatasetSource, n: int) -> list[str]:
    """Episodes with a 2D slice whose text (``dim=level&dim=level``) their prompt does not
    contain: if it reached the model, it came from the label."""
    found = [
        e
        for e in source.episode_ids
        if (s := source.label(e).slice) and "&" in s and s not in source.prompt(e)
    ]
    assert len(found) >= n, "ads_test has too few 2D-sliced episodes"
    return found[:n]


class Scripts:
    """What the scripted model does on each episode (told apart by their prompts)."""

    def __init__(self, source: DatasetSource, right: str, wrong: str, pair: str, over: str):
        self.source = source
        self.by_prompt = {
            source.prompt(right): self.right,
            source.prompt(wrong): self.wrong,
            source.prompt(pair): self.pair,
            source.prompt(over): self.over,
        }
        self.episode = {source.prompt(e): e for e in (right, wrong, pair, over)}
        self.lock = threading.Lock()
        self.markers = 0
        self.first_checked = threading.Event()  # the pair's first rollout read its variable
        self.waited: bool | None = None  # whether the pair's second rollout waited for it

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        prompt = prompt_of(request)
        return self.by_prompt[prompt](request, self.episode[prompt])

    def submit(self, episode: str, index: int) -> dict[str, Any]:
        label = self.source.label(episode)
        return call("submit", index, root_cause=label.cause, slice=label.slice or "")

    def right(self, request, episode):
        """A query, then the right answer."""
        if turn_of(request) == 0:
            return {"content": None, "tool_calls": [call("sql", 0, query="SHOW TABLES")]}
        return {"content": "Submitting.", "tool_calls": [self.submit(episode, 1)]}

    def wrong(self, request, episode):
        """At once, a wrong cause (no slice)."""
        label = self.source.label(episode)
        cause = next(c for c in self.source.answer_space.causes if c != label.cause)
        return {"content": None, "tool_calls": [call("submit", 0, root_cause=cause, slice="")]}

    def pair(self, request, episode):
        """Two rollouts of one episode: each reads a variable the other sets (it must be
        absent), sets its own, reads it back, and submits. The second waits until the first
        has set and read its variable, so the first's is live when the second looks."""
        turn = turn_of(request)
        if turn == 0:
            with self.lock:
                marker, self.markers = self.markers, self.markers + 1
            if marker == 1:
                self.waited = self.first_checked.wait(TIMEOUT)
            code = f"print(repr(globals().get('marker'))); marker = 'rollout-{marker}'"
            return {"content": None, "tool_calls": [call("python", 0, code=code)]}
        if turn == 1:
            return {"content": None, "tool_calls": [call("python", 1, code="print(marker)")]}
        first = next(m for m in request["messages"] if m["role"] == "assistant")
        if "rollout-0" in first["tool_calls"][0]["function"]["arguments"]:
            self.first_checked.set()
        return {"content": None, "tool_calls": [self.submit(episode, turn)]}

    def over(self, request, episode):
        """In one message, three queries (one past a budget of two) and the right answer."""
        calls = [call("sql", i, query=f"SELECT {i}") for i in range(BUDGET + 1)]
        return {"content": None, "tool_calls": [*calls, self.submit(episode, BUDGET + 1)]}


async def _run(env: vf.Env, plan: list[tuple[str, int]], ctx: ModelContext) -> dict:
    """Every ``(episode, n)`` of ``plan``: ``n`` rollouts of the episode, all at once, through
    verifiers' serving and rollout machinery. Returns ``{episode: [trace, ...]}``."""
    tasks = {t.data.episode_id: t for t in env.taskset}
    async with env.serving():
        slots = [(e, s) for e, n in plan for s in env.slots(tasks[e], n)]
        episodes = await asyncio.gather(*(env.run_slot(s, ctx) for _, s in slots))
    out: dict[str, list] = {}
    for (e, _), episode in zip(slots, episodes):
        assert not episode.errors, episode.errors
        out.setdefault(e, []).extend(episode.traces)
    return out


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory):
    """Five rollouts of four episodes, at once: a right submit, a wrong one, two rollouts of
    one episode, and (in a second environment, budget 2) calls past the budget."""
    source = DatasetSource(ADS_TEST)
    right, wrong, pair, over = sliced_episodes(source, 4)
    scripts = Scripts(source, right, wrong, pair, over)
    cache = tmp_path_factory.mktemp("verifiers-episodes")
    agent = {"max_model_turns": 8, "timeout": {"rollout": TIMEOUT}}
    env = load_environment(ADS_TEST, episodes=[right, wrong, pair], cache_dir=cache, **agent)
    budget_env = load_environment(
        ADS_TEST, episodes=[over], max_tool_calls=BUDGET, cache_dir=cache, **agent
    )
    started = time.monotonic()
    with ScriptedModel(scripts) as model:
        client = EvalClientConfig(base_url=model.base_url, api_key_var="CAUSALTRACE_STUB_KEY")
        ctx = ModelContext(model="scripted", client=client)

        async def both():
            return await asyncio.gather(
                _run(env, [(right, 1), (wrong, 1), (pair, 2)], ctx),
                _run(budget_env, [(over, 1)], ctx),
            )

        traces, budget_traces = asyncio.run(both())
    return {
        "source": source,
        "episodes": {"right": right, "wrong": wrong, "pair": pair, "over": over},
        "traces": {**traces, **budget_traces},
        "requests": model.requests,
        "scripts": scripts,
        "seconds": time.monotonic() - started,
    }


def reward_of(trace) -> float:
    return trace.rewards["causaltrace"].score


def outputs(trace) -> list[str]:
    return [m["content"] for m in completion_messages(trace) if m["role"] == "tool"]


# -- the tests -----------------------------------------------------------------------------------
def test_the_taskset_is_the_splits_episodes_with_their_ground_truth(tmp_path):
    source = DatasetSource(ADS_TEST)
    episodes = source.episode_ids[:3]
    env = load_environment(ADS_TEST, episodes=episodes, cache_dir=tmp_path)
    assert isinstance(env, vf.SingleAgentEnv)
    tasks = list(env.taskset)
    assert [t.data.episode_id for t in tasks] == episodes
    for task in tasks:
        assert isinstance(task, CausalTraceTask)
        e = task.data.episode_id
        label = source.label(e)
        assert task.data.prompt == source.prompt(e) and task.key == e
        assert task.data.answer == ground_truth_json(label, source.answer_space, rules=RL_RULES)
        assert json.loads(task.data.answer)["rules"] == RL_RULES.to_dict()  # 30 calls, retries
        assert task.data.info["episode_id"] == e and not LEAKY_METADATA_KEYS & set(task.data.info)
        assert label.cause not in json.dumps(task.data.info)
    # verifiers' own loaders resolve the id to this taskset, whose default harness is the
    # tool-less chat loop (not verifiers' bash harness, whose shell could read the labels)
    assert taskset_class(TASKSET_ID) is CausalTraceTaskset
    assert default_harness_id(TASKSET_ID) == TASKSET_ID
    assert (
        env.config.agent.harness.id == TASKSET_ID and env.config.agent.runtime.type == "subprocess"
    )
    assert issubclass(CausalTraceHarness, vf.Harness) and not CausalTraceHarness.EXECUTES_CODE


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_model_is_given_the_contracts_tools_and_never_the_label(rollouts):
    tools = ToolContract.for_dataset(ADS_TEST).openai()
    source = rollouts["source"]
    wrong = rollouts["episodes"]["wrong"]
    label = source.label(wrong)
    for request in rollouts["requests"]:
        assert request["tools"] == tools  # names, descriptions, schemas: the contract's
    for request in (r for r in rollouts["requests"] if prompt_of(r) == source.prompt(wrong)):
        text = json.dumps(request)
        assert label.slice not in text and '"label"' not in text


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_reward_is_compute_score_of_the_completion(rollouts):
    """A right submit scores 1.0 and a wrong cause less; each equals verl's compute_score on
    the same completion written as a Hermes-template model writes it, causaltrace.scoring's
    score of the same answer, and the score of the episode's own session."""
    source = rollouts["source"]
    for case, expect in (("right", 1.0), ("wrong", None)):
        episode = rollouts["episodes"][case]
        [trace] = rollouts["traces"][episode]
        task_answer = trace.task.data.answer
        completion = completion_messages(trace)
        reward = reward_of(trace)
        assert trace.state.done and trace.state.reason == "submitted"
        assert trace.stop_condition == "episode_over"
        assert reward == compute_score("causaltrace", hermes_text(completion), task_answer)["score"]
        assert reward == trace.metrics["causaltrace/session_score"]
        submitted = json.loads(completion[-1]["tool_calls"][0]["function"]["arguments"])
        label = source.label(episode)
        expected = score_output(submitted, label, source.answer_space).score
        assert reward == pytest.approx(expected)
        if expect is not None:
            assert reward == expect
        else:
            assert reward < 1.0 and trace.metrics["causaltrace/full_attribution"] == 0.0


@pytest.mark.slow
@pytest.mark.sandbox
def test_two_rollouts_of_one_episode_share_no_state(rollouts):
    traces = rollouts["traces"][rollouts["episodes"]["pair"]]
    assert len(traces) == 2
    assert rollouts["scripts"].waited  # the second looked while the first's variable was set
    seen = set()
    for trace in traces:
        first, second = outputs(trace)  # the two python outputs (the run stops at the submit)
        assert first.strip() == "None"  # the other rollout's variable is not here
        assert second.strip().startswith("rollout-")  # its own persists across its calls
        seen.add(second.strip())
        assert trace.state.tool_calls == 2 and trace.state.done  # its own count
        assert reward_of(trace) == 1.0
    assert seen == {"rollout-0", "rollout-1"}


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_rollout_past_its_budget_scores_zero(rollouts):
    """Three queries with a budget of two, then the right answer (in one message): the session
    ends at the third call and the right answer after it scores 0, in the session and in
    compute_score on the completion; the same completion under the default budget scores 1.0."""
    [trace] = rollouts["traces"][rollouts["episodes"]["over"]]
    answer = trace.task.data.answer
    assert json.loads(answer)["rules"] == EpisodeRules(BUDGET).to_dict()
    assert trace.state.reason == "tool-call budget exhausted" and trace.state.tool_calls == BUDGET
    assert reward_of(trace) == 0.0 and trace.metrics["causaltrace/session_score"] == 0.0
    text = hermes_text(completion_messages(trace))
    assert compute_score("causaltrace", text, answer)["score"] == 0.0
    source = rollouts["source"]
    label = source.label(rollouts["episodes"]["over"])
    default = ground_truth_json(label, source.answer_space, rules=RL_RULES)
    assert compute_score("causaltrace", text, default)["score"] == 1.0


@pytest.mark.slow
@pytest.mark.sandbox
def test_every_tool_server_and_sandbox_is_gone_after_the_rollouts(rollouts):
    leftover = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "causaltrace.training.verifiers_env" in cmdline and proc.name != str(os.getpid()):
                leftover.append(cmdline)
    assert leftover == []
