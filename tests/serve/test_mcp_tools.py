"""The agent tools over MCP (causaltrace.serve.mcp_tools), driven by the ``mcp`` SDK's own stdio
client as any MCP client would: it lists exactly ``sql`` and ``python``, both answer on the
episode's tables, and everything else is refused: other tool names (submit, reset, step,
state), resources and prompts, the dataset's labels and specs, and another episode's files,
from SQL or from the sandboxed Python."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters  # the dev extra installs the SDK
from mcp.client.stdio import stdio_client

from causaltrace.datasets.reading import open_episode

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "data" / "ads_test"


def _texts(result) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


async def _session_calls(episode_dir: Path, calls):
    """Run ``calls`` (name, arguments) against a server on ``episode_dir``: (tool names,
    resources, prompts, [(is_error, text)])."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "causaltrace.serve.mcp_tools", "--episode-dir", str(episode_dir)],
        cwd=str(ROOT),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = sorted(t.name for t in (await session.list_tools()).tools)
        resources = (await session.list_resources()).resources
        prompts = (await session.list_prompts()).prompts
        replies = []
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            replies.append((bool(result.is_error), _texts(result)))
        return names, resources, prompts, replies


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    cache = tmp_path_factory.mktemp("mcp-episodes")
    return open_episode(DATASET, "test-000000", cache), open_episode(DATASET, "test-000001", cache)


def test_an_mcp_client_gets_the_two_tools_and_nothing_else(episodes):
    mine, other = episodes
    labels = DATASET / "private" / "labels" / "shard-00000.jsonl"
    calls = [
        ("sql", {"query": "SELECT count(*) AS n FROM perf_daily"}),
        ("python", {"code": "print(len(perf_daily), sorted(perf_daily.columns)[:3])"}),
        ("python", {"code": "x = 41"}),
        ("python", {"code": "print(x + 1)"}),  # the namespace persists between calls
        ("submit", {"root_cause": "BUDGET_CAP", "slice": ""}),
        ("reset", {}),
        ("step", {"action": "x"}),
        ("state", {}),
        ("python", {"code": f"print(open({str(labels)!r}).read()[:80])"}),
        ("python", {"code": f"import os; print(os.listdir({str(other)!r}))"}),
        ("sql", {"query": f"SELECT * FROM read_json_auto('{labels}')"}),
        ("sql", {"query": "DROP TABLE perf_daily"}),
        ("sql", {"query": "SELECT count(*) AS n FROM perf_daily"}),
    ]
    names, resources, prompts, replies = asyncio.run(_session_calls(mine, calls))
    assert names == ["python", "sql"]
    assert resources == [] and prompts == []
    rows = int(_texts_row(replies[0][1]))
    assert rows > 1000 and not replies[0][0]
    assert replies[1] == (False, replies[1][1]) and replies[1][1].startswith(str(rows))
    assert replies[3][1].strip() == "42"
    for (error, text), (name, _) in zip(replies[4:8], calls[4:8], strict=True):
        assert error and f"Unknown tool: {name}" in text
    assert "BUDGET_CAP" not in replies[8][1] and "Error" in replies[8][1]  # no label file
    assert "Error" in replies[9][1]  # another episode's directory is not there
    assert "perf_daily.parquet" not in replies[9][1]
    assert "BUDGET_CAP" not in replies[10][1] and "rror" in replies[10][1]
    assert "rror" in replies[11][1]  # read-only
    assert int(_texts_row(replies[12][1])) == rows  # the table survived


def _texts_row(table: str) -> str:
    """The single value of a one-row, one-column sql result."""
    return table.splitlines()[2].strip()


def test_a_directory_without_tables_is_refused_in_one_line(tmp_path):
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "causaltrace.serve.mcp_tools", "--episode-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"causaltrace mcp: {tmp_path}: not an episode directory (no Parquet tables in it)"
    )
