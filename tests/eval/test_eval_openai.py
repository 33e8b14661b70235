"""The ``openai`` agent and the evaluation harness, end to end: full episodes through a stub
OpenAI-compatible server (started here, driven with the official ``openai`` client), the
sandboxed tools and the scorer. Multi-turn, malformed arguments, unknown tools, budgets, raw
``<tool_call>`` text, ``content: null`` / missing ids / reasoning fields, server errors (retried,
persistent, not retryable), resume, and the ``causaltrace-eval`` app."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("openai", reason="the openai agent's tests need the openai client")

from _eval_support import (
    StubServer,
    answer_of,
    call,
    completion,
    dataset_dir,
    requests_of,
    run_openai,
    scripted,
    submit_call,
)

from causaltrace.agents import make_agent
from causaltrace.agents.openai_agent import ModelServerError, parse_reply
from causaltrace.datasets.reading import open_episode
from causaltrace.env import DatasetSource
from causaltrace.errors import CausalTraceError
from causaltrace.eval import episode_rng, read_results
from causaltrace.eval.report import read_transcript

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    return DatasetSource(dataset_dir())


@pytest.fixture(scope="module")
def ids(source) -> list[str]:
    return source.episode_ids


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


# -- full episodes ---------------------------------------------------------------------------
def test_multi_turn_sql_python_submit_scores_one(source, ids, tmp_path):
    def script(ep, turn, request):
        if turn == 0:
            return completion(
                "Look at the tables.",
                [call("sql", {"query": "SELECT count(*) AS n FROM campaigns"})],
            )
        if turn == 1:
            return completion(None, [call("python", {"code": "print(len(creatives) * 10)"})])
        return completion("Done.", [submit_call(source, ep)])

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:2])
    assert [r["episode_id"] for r in summary.records] == ids[:2]
    for record in summary.records:
        assert record["score"] == pytest.approx(1.0) and record["full_attribution"] == 1.0
        assert record["error"] is None and record["reason"] == "submitted"
        assert (record["tool_calls"], record["turns"]) == (2, 3)
        assert (
            record["answer"]["root_cause"] == answer_of(source, record["episode_id"])["root_cause"]
        )
    first = requests_of(server, source, ids[0])
    assert len(first) == 3 and all(r["model"] == "stub-model" for r in first)
    assert {t["function"]["name"] for t in first[0]["tools"]} == {"sql", "python", "submit"}
    assert [m["role"] for m in first[0]["messages"]] == ["user"]
    sql_out = tool_messages(first[1])[0]
    assert sql_out["content"].split()[-3] == "4"  # "n\n-\n4\n(1 row)": four campaigns
    assert sql_out["tool_call_id"] == first[1]["messages"][1]["tool_calls"][0]["id"]
    creatives = pd.read_parquet(open_episode(source.root, ids[0]) / "creatives.parquet")
    assert tool_messages(first[2])[-1]["content"].strip() == str(len(creatives) * 10)
    assert summary.metrics.overall["full_attr_at_1"].value == 1.0
    out = tmp_path / "run"
    for name in (
        "results.jsonl",
        "run.json",
        "summary.md",
        "metrics.json",
        "confusion.png",
        "report.html",
    ):
        assert (out / name).exists(), name
    transcript = read_transcript(out / "transcripts" / f"{ids[0]}.jsonl")
    assert [m["role"] for m in transcript] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["agent"]["config"]["api_key"] == "***"  # secrets are not written
    assert "seed" not in run_info["dataset"]  # the dataset's generation seed stays private
    assert "FullAttr@1" in (out / "summary.md").read_text()


def test_malformed_arguments_and_unknown_tool_do_not_end_the_episode(source, ids, tmp_path):
    seen: dict[int, str] = {}

    def script(ep, turn, request):
        if turn:
            seen[turn] = tool_messages(request)[-1]["content"]
        if turn == 0:
            return completion(None, [call("sql", '{"query": "SELECT 1"')])  # cut-off JSON
        if turn == 1:
            return completion(None, [call("shell", {"cmd": "ls /"})])
        if turn == 2:
            return completion(None, [call("sql", ["SELECT 1"], raw=True)])  # not an object
        return completion(None, [submit_call(source, ep)])

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:1])
    record = summary.records[0]
    assert "not valid JSON" in seen[1]
    assert "unknown tool" in seen[2] and "shell" in seen[2]
    assert seen[3].startswith("Error")
    assert record["score"] == pytest.approx(1.0) and record["turns"] == 4


@pytest.mark.parametrize(
    ("env", "reason", "turns"),
    [
        ({"max_tool_calls": 30, "max_turns": 3}, "turn budget exhausted", 3),
        ({"max_tool_calls": 2, "max_turns": 40}, "tool-call budget exhausted", 3),
    ],
)
def test_budgets_truncate_with_the_no_answer_reward(source, ids, tmp_path, env, reason, turns):
    def script(ep, turn, request):
        return completion(None, [call("sql", {"query": f"SELECT {turn}"})])

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:1], env=env)
    record = summary.records[0]
    assert record["reason"] == reason and record["answer"] is None and record["error"] is None
    assert record["score"] == 0.0  # no answer: a format error, the lowest reward
    assert record["turns"] == turns
    assert len(server.requests) == turns


def test_final_answer_in_text(source, ids, tmp_path):
    def script(ep, turn, request):
        if turn == 0:
            return completion(None, [call("sql", {"query": "SELECT 1"})])
        answer = json.dumps(answer_of(source, ep))
        return completion(f"<think>maybe NO_ANOMALY?</think>The evidence says:\n{answer}")

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:1])
    assert summary.records[0]["score"] == pytest.approx(1.0)
    assert summary.records[0]["turns"] == 2


def test_raw_tool_call_text_is_parsed(source, ids, tmp_path):
    def script(ep, turn, request):
        if turn == 0:
            block = json.dumps({"name": "sql", "arguments": {"query": "SELECT 42 AS x"}})
            return completion(f"Checking.\n<tool_call>\n{block}\n</tool_call>")
        block = json.dumps({"name": "submit", "arguments": answer_of(source, ep)})
        return completion(f"<tool_call>{block}</tool_call>")

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:1])
    second = server.requests[1]
    assistant = second["messages"][1]
    assert (
        assistant["content"] == "Checking."
        and assistant["tool_calls"][0]["function"]["name"] == "sql"
    )
    assert "42" in tool_messages(second)[0]["content"]
    assert summary.records[0]["score"] == pytest.approx(1.0)


def test_null_content_missing_ids_and_reasoning_fields(source, ids, tmp_path):
    def script(ep, turn, request):
        if turn == 0:
            return completion(
                None,
                [call("sql", {"query": "SELECT 7 AS x"}, call_id=None, raw=True)],
                reasoning_content="First the tables.",
            )
        return completion(
            None, [submit_call(source, ep, call_id=None)], reasoning="It must be this."
        )

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:1])
    second = server.requests[1]["messages"]
    assert second[1]["tool_calls"][0]["id"] == "call_1_0"
    assert (
        second[2] == {"role": "tool", "tool_call_id": "call_1_0", "content": second[2]["content"]}
        and "7" in second[2]["content"]
    )
    assert "reasoning" not in second[1] and "reasoning_content" not in second[1]
    assert json.loads(second[1]["tool_calls"][0]["function"]["arguments"]) == {
        "query": "SELECT 7 AS x"
    }
    assert summary.records[0]["score"] == pytest.approx(1.0)
    transcript = read_transcript(tmp_path / "run" / "transcripts" / f"{ids[0]}.jsonl")
    assistants = [m for m in transcript if m["role"] == "assistant"]
    assert [m.get("reasoning") for m in assistants] == ["First the tables.", "It must be this."]
    assert assistants[0]["usage"]["total_tokens"] == 15


def test_server_errors_are_retried(source, ids, tmp_path):
    failures = iter(
        [(500, {"error": {"message": "overloaded"}}), (429, {"error": {"message": "slow down"}})]
    )

    def script(ep, turn, request):
        if turn == 1:
            failure = next(failures, None)
            if failure is not None:
                return failure
            return completion(None, [submit_call(source, ep)])
        return completion(None, [call("sql", {"query": "SELECT 1"})])

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:1])
    record = summary.records[0]
    assert record["error"] is None and record["score"] == pytest.approx(1.0)
    assert len(server.requests) == 4  # turn 0, two failures of turn 1, turn 1


def test_a_persistent_server_error_ends_only_that_episode(source, ids, tmp_path):
    broken = ids[1]

    def script(ep, turn, request):
        if turn == 0:
            return completion(None, [call("sql", {"query": "SELECT 1"})])
        if ep == broken:
            return 500, {"error": {"message": "CUDA out of memory"}}
        return completion(None, [submit_call(source, ep)])

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:3], retries=2)
    by_id = {r["episode_id"]: r for r in summary.records}
    assert len(requests_of(server, source, broken)) == 1 + 3  # turn 0, then 1 try + 2 retries
    bad = by_id[broken]
    assert "HTTP 500" in bad["error"] and "CUDA out of memory" in bad["error"]
    assert bad["answer"] is None and bad["score"] == 0.0 and bad["tool_calls"] == 1
    for ep in (ids[0], ids[2]):
        assert by_id[ep]["error"] is None and by_id[ep]["score"] == pytest.approx(1.0)
    transcript = read_transcript(tmp_path / "run" / "transcripts" / f"{broken}.jsonl")
    assert "HTTP 500" in transcript[-1]["error"]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["counts"]["errors"] == 1
    assert metrics["metrics"]["overall"]["full_attr_at_1"]["value"] == pytest.approx(2 / 3)


def test_client_errors_are_not_retried(source, ids, tmp_path):
    def script(ep, turn, request):
        return 400, {"error": {"message": "maximum context length exceeded"}}

    with StubServer(scripted(source, script)) as server:
        summary = run_openai(server, source, tmp_path / "run", ids[:1], retries=3)
    assert len(server.requests) == 1
    assert "HTTP 400" in summary.records[0]["error"]
    assert "maximum context length" in summary.records[0]["error"]


def test_resume_skips_scored_episodes(source, ids, tmp_path):
    def script(ep, turn, request):
        if turn == 0:
            return completion(None, [call("sql", {"query": "SELECT 1"})])
        return completion(None, [submit_call(source, ep)])

    out = tmp_path / "run"
    with StubServer(scripted(source, script)) as server:
        first = run_openai(server, source, out, ids[:2])
        assert (first.ran, first.resumed, len(server.requests)) == (2, 0, 4)
        second = run_openai(server, source, out, ids[:3])
        assert (second.ran, second.resumed) == (1, 2)
        assert len(server.requests) == 6  # only the new episode went to the server
        assert {r["episode_id"] for r in second.records} == set(ids[:3])
        again = run_openai(server, source, out, ids[:3])
        assert (again.ran, len(server.requests)) == (0, 6)
        with pytest.raises(CausalTraceError, match="agent config"):
            run_openai(server, source, out, ids[:3], model="another-model")
    assert len((out / "results.jsonl").read_text().splitlines()) == 3
    assert set(read_results(out / "results.jsonl")) == set(ids[:3])


def test_a_torn_last_line_is_repaired_on_resume(source, ids, tmp_path):
    def script(ep, turn, request):
        return completion(None, [submit_call(source, ep)])

    out = tmp_path / "run"
    with StubServer(scripted(source, script)) as server:
        run_openai(server, source, out, ids[:1])
        with open(out / "results.jsonl", "a") as fh:
            fh.write('{"episode_id": "' + ids[1] + '", "sco')  # a crash mid-append
        summary = run_openai(server, source, out, ids[:2])
    assert summary.ran == 1 and len(server.requests) == 2
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["episode_id"] for line in lines] == ids[:2]


# -- units -----------------------------------------------------------------------------------
def test_episode_rng_depends_on_seed_and_episode_only():
    a = episode_rng(0, "test-000001").random(3)
    assert np.array_equal(a, episode_rng(0, "test-000001").random(3))
    assert not np.array_equal(a, episode_rng(1, "test-000001").random(3))
    assert not np.array_equal(a, episode_rng(0, "test-000002").random(3))


def test_backoff_is_exponential_with_jitter_from_the_rng():
    agent = make_agent("openai", {"model": "m", "backoff": 1.0, "max_backoff": 10.0})
    delays = [agent.backoff_delay(k, np.random.default_rng(3)) for k in range(6)]
    assert delays == [agent.backoff_delay(k, np.random.default_rng(3)) for k in range(6)]
    for k, d in enumerate(delays):
        assert 0.5 * min(10.0, 2.0**k) <= d < 1.5 * min(10.0, 2.0**k)
    assert agent.backoff_delay(0, np.random.default_rng(0), retry_after=7.0) >= 7.0


def test_agent_config_errors_name_the_key():
    with pytest.raises(CausalTraceError, match="model"):
        make_agent("openai", {"name": "openai"})
    with pytest.raises(CausalTraceError, match="temprature"):
        make_agent("openai", {"model": "m", "temprature": 0.2})


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not-a-url", "must be an http\\(s\\) URL with a host"),
        ("localhost:8000/v1", "must be an http\\(s\\) URL with a host"),
        ("ftp://models.example/v1", "must be an http\\(s\\) URL with a host"),
        ("http://:8000/v1", "must be an http\\(s\\) URL with a host"),
        ("http://localhost:99999/v1", "bad port"),
    ],
)
def test_a_malformed_base_url_fails_before_any_episode(url, message):
    """A typo in agent.base_url is one error when the agent is made (before the harness opens
    any episode), not six retries per episode against a URL that cannot work."""
    with pytest.raises(CausalTraceError, match=message):
        make_agent("openai", {"model": "m", "base_url": url})
    assert make_agent("openai", {"model": "m", "base_url": "http://localhost:8000/v1"}).server == (
        "http://localhost:8000/v1"
    )


def test_parse_reply_tolerates_server_quirks():
    def body(**message):
        return {"choices": [{"message": {"role": "assistant", **message}}]}

    reply = parse_reply(
        body(
            content=None,
            tool_calls=[
                {"function": {"name": "sql", "arguments": {"query": "SELECT 1"}}},
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": "python", "arguments": "{bad"},
                },
            ],
        )
    )
    assert reply.content is None
    assert [(c["name"], c["arguments"], c["id"]) for c in reply.calls] == [
        ("sql", {"query": "SELECT 1"}, None),
        ("python", "{bad", "x"),
    ]
    legacy = parse_reply(body(content="", function_call={"name": "sql", "arguments": "{}"}))
    assert legacy.calls[0]["name"] == "sql"
    parts = parse_reply(
        body(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    )
    assert parts.content == "ab" and not parts.calls
    raw = parse_reply(
        body(
            content='<think>a <tool_call>{"name": "x"}</tool_call></think>'
            'Go.<tool_call>{"name": "sql", "arguments": {"query": '
            '"SELECT 1"}}</tool_call><tool_call>{"name": "python", '
            '"arguments": {"code": "1+'
        )
    )
    assert [c["name"] for c in raw.calls] == ["sql", "python"]  # not the one in <think>
    assert isinstance(raw.calls[1]["arguments"], str)  # unterminated: the raw text goes on
    assert raw.content.startswith("<think>") and raw.content.endswith("Go.")
    thought = parse_reply(body(content="x", reasoning_content="why"))
    assert thought.reasoning == "why"
    with pytest.raises(ModelServerError, match="no choices"):
        parse_reply({"object": "chat.completion", "choices": []})
    with pytest.raises(ModelServerError, match="error"):
        parse_reply({"error": {"message": "model not loaded"}})


# -- the command line ------------------------------------------------------------------------
def test_causaltrace_eval_app_with_the_openai_agent(source, ids, tmp_path):
    def script(ep, turn, request):
        return completion(None, [submit_call(source, ep)])

    out = tmp_path / "app"
    with StubServer(scripted(source, script)) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "causaltrace.apps.evaluate",
                "agent=openai",
                "agent.model=stub-model",
                f"agent.base_url={server.base_url}",
                f"dataset_dir={dataset_dir()}",
                f"out_dir={out}",
                "limit=2",
                "progress=false",
                "n_boot=50",
                "concurrency=2",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "FullAttr@1" in done.stdout and "ran 2 episode(s)" in done.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["metrics"]["overall"]["full_attr_at_1"]["value"] == 1.0
    assert metrics["counts"]["episodes"] == 2 and len(server.requests) == 2


def test_causaltrace_eval_app_generates_a_missing_dataset(tmp_path):
    data, out = tmp_path / "data", tmp_path / "random"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "causaltrace.apps.evaluate",
            "agent=random",
            f"dataset_dir={data}",
            f"out_dir={out}",
            "progress=false",
            "n_boot=50",
            "dataset.n_episodes=3",
            "dataset.shard_size=3",
            "dataset.composition.total=3",
            "dataset.composition.sliced=2",
            "dataset.composition.two_d=0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (data / "manifest.json").exists()
    assert len(read_results(out / "results.jsonl")) == 3
    assert json.loads((out / "run.json").read_text())["agent"]["name"] == "random"
