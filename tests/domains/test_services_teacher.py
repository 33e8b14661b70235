"""The services domain's investigating teacher (domains/services/teacher/, issue 24).

End to end on a small generated split (exported with ``causaltrace-export sft``'s code and
measured by ``causaltrace.training.sft_metrics``): right on most episodes, rows within the
issue's bounds (median tool calls <= 12, no argument over 1,500 characters, >= 70% of the
messages after a tool result quoting it, >= 50% distinct openings), every call valid for the
exported schemas, no pasted library. The pieces alone: the onset scan finds a planted step,
the footprint query's statistics equal the same arithmetic done by hand in numpy, and the
candidate set follows the call graph and the caches whose misses load it.
"""

from __future__ import annotations

import asyncio
import math

import duckdb
import numpy as np
import pandas as pd
import pytest
from _sft_support import assert_no_pasted_library, assert_valid_calls

from causaltrace.agents import make_agent
from causaltrace.agents.result_tables import parse_table
from causaltrace.datasets.generation import Job, run
from causaltrace.env import DatasetSource
from causaltrace.eval import evaluate
from causaltrace.tools.sql import render_table
from causaltrace.training.export import export_sft
from causaltrace.training.sft_metrics import read_rows, sft_metrics
from causaltrace_domains.services.teacher.agent import _closure, _onset
from causaltrace_domains.services.teacher.footprints import FOOTPRINTS, footprint_sql, readings

pytestmark = [pytest.mark.timeout(900), pytest.mark.sandbox]


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("services-teacher")
    job = Job.from_config(
        {
            "out_dir": str(root / "ds"),
            "domain": {"name": "services"},
            "dataset": {
                "name": "svcteach",
                "split": "svcteach",
                "seed": 77,
                "n_episodes": 18,
                "composition": {"kind": "prior"},
                "shard_size": 18,
            },
        }
    )
    run(job, show_progress=False)
    source = DatasetSource(root / "ds")
    summary = asyncio.run(
        evaluate(
            make_agent("services_teacher"), source, root / "run", concurrency=2, progress=False
        )
    )
    counts = export_sft([root / "run"], root / "sft.jsonl")
    return summary, counts, read_rows(root / "sft.jsonl")


def test_the_teacher_is_right_and_its_rows_teach(teacher_run):
    # 0.99 on the 198 episodes of services_test: 14 or fewer right of 18 has probability
    # under 1e-4 at that rate.
    _, counts, rows = teacher_run
    assert counts["correct"] >= 15, counts
    m = sft_metrics(rows)
    assert m["tool_calls"]["p50"] <= 12, m
    assert m["max_argument_chars"] <= 1500, m
    assert m["quote_share"] >= 0.7, m
    assert m["distinct_openings"] >= 0.5, m


def test_calls_are_valid_plain_queries_and_wording_varies(teacher_run):
    _, _, rows = teacher_run
    assert_valid_calls(rows)
    assert_no_pasted_library(rows)
    texts = [m["content"] for r in rows for m in r["messages"][1:] if m["role"] == "assistant"]
    assert len(set(texts)) == len(texts)


def test_onset_scan_finds_a_planted_step():
    rng = np.random.default_rng(0)
    values = np.exp(rng.normal(0.0, 0.05, 24))
    values[15:] *= 3.0  # the step: 9 buckets before the end
    rows = [{"ts": f"t{i}", "x": f"{v:.4f}"} for i, v in enumerate(values)]
    index, before, after, z = _onset(rows, "x")
    assert index == 15
    assert after / before == pytest.approx(3.0, rel=0.1)
    assert z > 20


def test_footprint_statistics_equal_the_arithmetic_by_hand():
    """The BAD_DEPLOY query on a synthetic table, read back from the sql tool's text: the
    shift's z is (after - before) / (max(sd, floor) x sqrt(1/n_after + 1/n_before))."""
    rng = np.random.default_rng(3)
    ts = pd.date_range("2026-03-04 12:00", periods=40, freq="15min")
    requests = rng.integers(9000, 11000, 40)
    errors = rng.poisson(20, 40)
    errors[32:] += 400  # a bad version from bucket 32
    memory = 40 + rng.normal(0, 1, 40)
    memory[32:] += 12
    metrics = pd.DataFrame(
        {
            "ts": ts,
            "service": "cart",
            "region": "us_east",
            "requests": requests,
            "errors": errors,
            "latency_p50_ms": 20.0,
            "latency_p99_ms": 80.0,
        }
    )
    saturation = pd.DataFrame(
        {
            "ts": ts,
            "service": "cart",
            "region": "us_east",
            "cpu_pct": 40.0,
            "cpu_steal_pct": 1.0,
            "memory_pct": memory,
            "connections_active": 5.0,
            "connections_pending": 0.0,
        }
    )
    onset = str(ts[32])[:16]
    con = duckdb.connect()
    con.register("service_metrics", metrics)
    con.register("saturation", saturation)
    query = footprint_sql(FOOTPRINTS["BAD_DEPLOY"], ("cart",), ("us_east",), onset)
    cursor = con.execute(query)
    text = render_table([d[0] for d in cursor.description], cursor.fetchall())
    (reading,) = readings(FOOTPRINTS["BAD_DEPLOY"], parse_table(text))
    log_err = np.log((errors + 1) / requests)  # 32 buckets (8 hours) before, 8 after
    before, after = log_err[:32], log_err[32:]
    sd = max(float(np.std(before, ddof=1)), 0.3)
    z = (after.mean() - before.mean()) / (sd * math.sqrt(1 / 8 + 1 / 32))
    (_, err_shift), (_, mem_shift) = reading.shifts
    assert err_shift.z == pytest.approx(z, rel=1e-2)  # the query rounds to 4 decimals
    assert mem_shift.effect == pytest.approx(memory[32:].mean() - memory[:32].mean(), abs=1e-3)
    assert reading.z == min(err_shift.z, mem_shift.z)
    assert reading.slice_text() == "service=cart&region=us_east"


def test_candidates_follow_the_call_graph_and_the_caches_that_load_it():
    graph = [
        {"caller": "frontend", "callee": "session_cache", "only_on_miss_of": ""},
        {"caller": "frontend", "callee": "orders_db", "only_on_miss_of": "session_cache"},
        {"caller": "frontend", "callee": "catalog", "only_on_miss_of": ""},
        {"caller": "catalog", "callee": "catalog_db", "only_on_miss_of": "product_cache"},
        {"caller": "checkout", "callee": "order_queue", "only_on_miss_of": ""},
    ]
    # The queue's consumer writes to orders_db; session_cache misses load orders_db.
    assert set(_closure(graph, ("order_queue",))) == {"order_queue", "orders_db", "session_cache"}
    assert set(_closure(graph, ("catalog",))) == {"catalog", "catalog_db", "product_cache"}
    assert "checkout" not in _closure(graph, ("frontend",))
