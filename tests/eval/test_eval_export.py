"""``causaltrace-export sft``: only fully correct trajectories, in the chat format TRL's
SFTTrainer takes for tool calling (``messages`` with ``tool_calls`` and ``tool`` messages, and
a ``tools`` column), with the dataset and evaluation seed recorded but no generation seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the export test runs the openai agent")

from _eval_support import (
    StubServer,
    call,
    completion,
    dataset_dir,
    run_openai,
    scripted,
    submit_call,
)

from causaltrace.env import DatasetSource, tool_schemas_for
from causaltrace.training.export import export_sft

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    return DatasetSource(dataset_dir())


@pytest.fixture(scope="module")
def run_dir(source, tmp_path_factory) -> Path:
    """Episode 0 right after sql and python calls (with reasoning), 1 wrong, 2 right at once
    (citing a number no output showed), 3 right but after a malformed call, 4 ended by a server
    error."""
    ids = source.episode_ids
    out = tmp_path_factory.mktemp("export") / "run"

    def script(ep, turn, request):
        if ep == ids[4]:
            return 500, {"error": {"message": "down"}}
        if ep == ids[0] and turn == 0:
            return completion(
                "Tables first.",
                [call("sql", {"query": "SHOW TABLES"})],
                reasoning_content="start broad",
            )
        if ep == ids[0] and turn == 1:
            return completion(None, [call("python", {"code": "print(len(campaigns))"})])
        if ep == ids[1]:
            return completion(None, [call("submit", {"root_cause": "NO_ANOMALY", "slice": ""})])
        if ep == ids[3] and turn == 0:
            return completion(None, [call("sql", '{"query": ')])
        if ep == ids[2]:  # right, but it cites a number nothing showed it
            return completion("CPC rose 41.7% on its baseline.", [submit_call(source, ep)])
        return completion("Submitting.", [submit_call(source, ep)])

    with StubServer(scripted(source, script)) as server:
        run_openai(server, source, out, ids[:5], retries=0, system_prompt="Be careful.")
    return out


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sft_export_keeps_correct_trajectories_in_trl_format(source, run_dir, tmp_path):
    ids = source.episode_ids
    out = tmp_path / "sft.jsonl"
    counts = export_sft([run_dir], out)
    assert counts["episodes"] == 5 and counts["correct"] == 3 and counts["written"] == 2
    assert counts["skipped"] == {"a tool call's arguments are not valid JSON": 1}
    data = rows(out)
    assert [r["metadata"]["episode_id"] for r in data] == [ids[0], ids[2]]
    first = data[0]
    assert first["tools"] == tool_schemas_for(source.answer_space)
    roles = [m["role"] for m in first["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert first["messages"][0]["content"] == "Be careful."
    assert first["messages"][1]["content"] == source.prompt(ids[0])
    calls = {}
    for m in first["messages"]:
        assert set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name"}
        assert isinstance(m["content"], str)
        for tc in m.get("tool_calls", []):
            assert tc["type"] == "function" and isinstance(tc["function"]["arguments"], dict)
            calls[tc["id"]] = tc["function"]["name"]
        if m["role"] == "tool":
            assert calls[m["tool_call_id"]] == m["name"]
    last = first["messages"][-1]
    assert last["tool_calls"][0]["function"] == {
        "name": "submit",
        "arguments": {
            "root_cause": source.label(ids[0]).cause,
            "slice": source.label(ids[0]).slice or "",
        },
    }
    meta = first["metadata"]
    assert meta["split"] == "evaltest" and meta["dataset"] == "evaltest"
    assert meta["eval_seed"] == 0 and meta["agent"] == "openai" and meta["model"] == "stub-model"
    assert len(meta["manifest_sha256"]) == 64
    assert "seed" not in meta and "cause" not in meta and "label" not in meta
    sidecar = json.loads((tmp_path / "sft.meta.json").read_text())
    assert sidecar["counts"] == counts and sidecar["runs"][0]["split"] == "evaltest"
    assert counts["grounding"] == {
        "policy": "flag",
        "numbers_cited": 1,
        "numbers_grounded": 0,
        "grounded_share": 0.0,
        "rows_with_ungrounded": 1,
    }


def test_sft_export_refuses_rows_citing_unshown_numbers(source, run_dir, tmp_path):
    """grounding="refuse" leaves out the row whose text cites 41.7%: no output showed it."""
    ids = source.episode_ids
    out = tmp_path / "sft.jsonl"
    counts = export_sft([run_dir], out, grounding="refuse")
    assert [r["metadata"]["episode_id"] for r in rows(out)] == [ids[0]]
    assert counts["skipped"]["cites a number no earlier output showed"] == 1
    assert counts["grounding"]["rows_with_ungrounded"] == 1
    with pytest.raises(Exception, match=r"grounding is one of \['flag', 'refuse', 'off'\]"):
        export_sft([run_dir], out, grounding="strict")


def test_sft_export_options(source, run_dir, tmp_path):
    out = tmp_path / "sft.jsonl"
    export_sft([run_dir], out, limit=1, reasoning="keep", arguments="string", system="Sys.")
    (row,) = rows(out)
    assert row["messages"][0] == {"role": "system", "content": "Sys."}
    assistant = row["messages"][2]
    assert assistant["reasoning_content"] == "start broad"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {
        "query": "SHOW TABLES"
    }


def test_export_command_line(run_dir, tmp_path):
    out = tmp_path / "cli.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "causaltrace.apps.export",
            "sft",
            "--run",
            str(run_dir),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wrote 2 trajectories" in done.stdout and len(rows(out)) == 2


def test_export_loads_with_hugging_face_datasets(run_dir, tmp_path):
    datasets = pytest.importorskip("datasets", reason="the 'datasets' library (dev extra)")
    for arguments in ("object", "string"):
        out = tmp_path / f"sft-{arguments}.jsonl"
        export_sft([run_dir], out, arguments=arguments)
        loaded = datasets.load_dataset("json", data_files=str(out), split="train")
        assert loaded.num_rows == 2
        assert {"messages", "tools", "metadata"} <= set(loaded.column_names)
    # JSON-text arguments survive Arrow's schema inference unchanged, whatever the version
    assert loaded[0]["messages"][2]["tool_calls"] == rows(out)[0]["messages"][2]["tool_calls"]
