"""The investigating teacher's SFT rows (issue 24): run on a small generated split, exported with
``causaltrace-export sft``'s code, and measured by ``causaltrace.training.sft_metrics``.

The bounds are the issue's: median tool calls <= 12, no argument over 1,500 characters, >= 70%
of the assistant messages after a tool result quoting one of its numbers, >= 50% distinct
opening three-call sequences, and (issue 40) >= 50% distinct opening *intents* (the tables the
first three calls read, spelling ignored: the teacher's opening orders, not its wording); and
every call is a valid call of the exported tool schemas.
"""

from __future__ import annotations

import asyncio
import statistics

import pytest
from _sft_support import assert_no_pasted_library, assert_valid_calls

from causaltrace.agents import make_agent
from causaltrace.datasets.generation import Job, run
from causaltrace.env import DatasetSource
from causaltrace.eval import evaluate
from causaltrace.training.export import export_sft
from causaltrace.training.sft_metrics import numbers, quotes, read_rows, sft_metrics

pytestmark = [pytest.mark.timeout(900), pytest.mark.sandbox]


@pytest.fixture(scope="module")
def teacher_split(tmp_path_factory):
    root = tmp_path_factory.mktemp("teacher-sft")
    job = Job.from_config(
        {
            "out_dir": str(root / "ds"),
            "domain": {"name": "ads", "preset": "small"},
            "dataset": {
                "name": "teachertest",
                "split": "teachertest",
                "seed": 2424,
                "n_episodes": 10,
                "composition": {"kind": "quotas", "total": 10, "sliced": 7, "two_d": 2},
                "shard_size": 10,
                "max_attempts": 400,  # as the committed splits allow
            },
        }
    )
    run(job, show_progress=False)
    return root


@pytest.fixture(scope="module")
def teacher_rows(teacher_split):
    root = teacher_split
    source = DatasetSource(root / "ds")
    summary = asyncio.run(
        evaluate(make_agent("teacher"), source, root / "run", concurrency=2, progress=False)
    )
    counts = export_sft([root / "run"], root / "sft.jsonl")
    return summary, counts, read_rows(root / "sft.jsonl")


def test_rows_teach_investigation(teacher_rows):
    _, counts, rows = teacher_rows
    assert counts["written"] >= 6, counts  # the teacher is right on most of the ten
    m = sft_metrics(rows)
    assert m["tool_calls"]["p50"] <= 12, m
    assert m["max_argument_chars"] <= 1500, m
    assert m["quote_share"] >= 0.7, m
    assert m["distinct_openings"] >= 0.5, m
    assert m["distinct_opening_kinds"] >= 0.5, m


def test_every_call_is_valid_for_the_exported_schema(teacher_rows):
    assert_valid_calls(teacher_rows[2])


def test_no_pasted_library_and_plain_queries(teacher_rows):
    assert_no_pasted_library(teacher_rows[2])


def test_phrasing_varies_with_the_episode_rng(teacher_rows):
    _, _, rows = teacher_rows
    texts = [m["content"] for r in rows for m in r["messages"][1:] if m["role"] == "assistant"]
    # the same situations are worded differently across rows
    assert len(set(texts)) == len(texts)
    openings = {r["messages"][1]["content"].split(":")[0] for r in rows}
    assert len(openings) >= 2


def test_numbers_skip_dates_row_counts_and_digits():
    text = "2026-02-23 | 4484 | 7 | 0.5 | 0.55 | -12% | 31.0 | (12 rows)"
    assert numbers(text) == {"4484", "0.55", "12", "31"}
    assert numbers("(12 rows)") == set()


def test_quotes_count_only_numbers_the_result_printed():
    row = {
        "messages": [
            {"role": "user", "content": "ALERT"},
            {
                "role": "assistant",
                "content": "look",
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "sql", "arguments": {"query": "SELECT 35"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "a", "name": "sql", "content": "x\n-\n35\n812"},
            {"role": "assistant", "content": "It printed 35 as asked.", "tool_calls": []},
        ]
    }
    assert quotes(row) == (1, 1, 0)  # 35 was in the query: not a reading of the result
    row["messages"][-1]["content"] = "812 orders: the slice holds."
    assert quotes(row) == (1, 1, 1)


def test_opening_counts_distinct_sequences():
    def row(query):
        call = {
            "id": "a",
            "type": "function",
            "function": {"name": "sql", "arguments": {"query": query}},
        }
        return {
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
            ]
        }

    m = sft_metrics([row("SELECT 1"), row("SELECT  1"), row("SELECT 2")])
    assert m["distinct_openings"] == pytest.approx(2 / 3)
    assert statistics.median([1, 1, 1]) == m["tool_calls"]["p50"]


def test_the_teacher_opens_in_different_orders(teacher_split, tmp_path):
    """Issue 40: "several reasoning orders, drawn per episode". The same episode investigated
    under six evaluation seeds opens with different intents (the tables its first three calls
    read); with the best-gain choice alone the opening was fixed by the page (one or two
    orders per episode, 16 of 74 distinct over ads_hard)."""
    from causaltrace.training.sft_metrics import opening_kind

    root = tmp_path / "seeds"
    source = DatasetSource(teacher_split / "ds")
    kinds: dict[str, set] = {}
    for seed in range(6):
        run_dir = root / f"run{seed}"
        asyncio.run(
            evaluate(make_agent("teacher"), source, run_dir, seed=seed, limit=2, progress=False)
        )
        export_sft([run_dir], root / f"sft{seed}.jsonl")
        for row in read_rows(root / f"sft{seed}.jsonl"):
            kinds.setdefault(row["metadata"]["episode_id"], set()).add(opening_kind(row))
    assert len(kinds) == 2, kinds
    assert min(len(k) for k in kinds.values()) >= 3, kinds
