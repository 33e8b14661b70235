"""Issue 12, D1 and D2: the sql tool cannot change an episode's tables, nor take the host down.

D1: every statement is checked, recursively (``EXPLAIN ANALYZE <write>`` used to run the
write), and the database is opened read-only, so a write that got past the check still fails.
D2: queries run in a separate, resource-limited worker process per episode: DuckDB functions
that ignore ``interrupt()`` and ``memory_limit`` are killed at the time limit, allocations are
bounded by the worker's rlimits (the host's memory does not grow), and one episode's stuck query
delays no other episode.

Everything goes through the public API (``ToolRuntime``/``EpisodeTools``), as a trainer uses it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _tools_support import make_episode, tools_config

from causaltrace.tools import SyncToolRuntime, ToolRuntime

TIMEOUT = 3.0
MARGIN = 2.0  # seconds past the time limit a stopped query may take to answer
# DuckDB list functions ignore interrupt(): this ran 38-82 s against a 30 s limit.
STUCK = "SELECT len(list_distinct(range(20000000)))"
# ... and ignore memory_limit: this grew the host process to 23 GB.
HUGE = "SELECT count(*) FROM (SELECT unnest(range(3000000000)))"
TESTS = Path(__file__).resolve().parents[1]
ROWS = {"max_rows": 10, "max_chars": 2000}


pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def runtime():
    owner = SyncToolRuntime(tools_config(sql_timeout=TIMEOUT, warm_workers=1))
    yield owner
    owner.close()


@pytest.fixture
def tools(runtime, tmp_path):
    episode = runtime.episode(make_episode(tmp_path))
    yield episode
    episode.close()


# -- D1: read-only, recursively -------------------------------------------------------------
STATE = [
    "SELECT count(*), sum(revenue), count(DISTINCT region) FROM orders",
    "SELECT count(*) FROM customers",
    "SELECT database_name, schema_name, table_name FROM duckdb_tables() ORDER BY ALL",
    "SELECT database_name, readonly FROM duckdb_databases() ORDER BY ALL",
    "SELECT count(*) FROM duckdb_functions() WHERE function_name = 'm'",
    "SELECT count(*) FROM duckdb_variables()",
    "SELECT name, value FROM duckdb_settings() WHERE name IN ('threads', 'memory_limit', "
    "'enable_external_access', 'lock_configuration', 'enable_optimizer') ORDER BY name",
]


def state(tools) -> list[str]:
    return [tools.sql(q) for q in STATE]


@pytest.mark.parametrize(
    "query",
    [
        "EXPLAIN ANALYZE DROP TABLE orders",
        "EXPLAIN ANALYZE DELETE FROM orders",
        "EXPLAIN ANALYZE UPDATE orders SET revenue = 0",
        "EXPLAIN ANALYZE INSERT INTO orders SELECT * FROM orders",
        "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
        "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
        "EXPLAIN ANALYZE CREATE OR REPLACE TABLE orders AS SELECT 1 AS revenue",
        "EXPLAIN ANALYZE CREATE MACRO m(x) AS x + 1",
        "EXPLAIN ANALYZE CREATE TEMP MACRO m(x) AS x + 1",
        "EXPLAIN ANALYZE ALTER TABLE orders DROP COLUMN revenue",
        "EXPLAIN ANALYZE ATTACH ':memory:' AS other",
        "EXPLAIN ANALYZE COPY orders TO '/tmp/ct-leak.csv'",
        "EXPLAIN ANALYZE SET threads = 4",
        "EXPLAIN ANALYZE SET VARIABLE x = 1",
        "EXPLAIN ANALYZE PRAGMA disable_optimizer",
        "EXPLAIN ANALYZE PREPARE p AS DELETE FROM orders",
        "EXPLAIN ANALYZE CHECKPOINT",
        "EXPLAIN ANALYZE PIVOT orders ON region USING sum(units)",
        "EXPLAIN DROP TABLE orders",
        "EXPLAIN (ANALYZE) DROP TABLE orders",
        "EXPLAIN (FORMAT json) DELETE FROM orders",
        "explain\nanalyse drop table orders",
        "/* a comment */ EXPLAIN /* another */ ANALYZE DROP TABLE orders -- the end",
        "SELECT 1; EXPLAIN ANALYZE DROP TABLE orders",
        "CREATE TEMP TABLE t AS SELECT 1",
        "CREATE TEMP MACRO m(x) AS x + 1",
        "CREATE MACRO m(x) AS x + 1",
        "CREATE VIEW v AS SELECT 1",
        "ATTACH ':memory:' AS other",
        "DETACH memory",
        "USE temp",
        "COPY orders TO '/tmp/ct-leak.csv'",
        "COPY orders FROM '/etc/hostname'",
        "SET VARIABLE x = 1",
        "SET threads = 4",
        "RESET threads",
        "PRAGMA threads = 4",
        "PRAGMA disable_optimizer",
        "PRAGMA enable_profiling",
        "PRAGMA force_checkpoint",
        "PRAGMA import_database('/tmp')",
        "PRAGMA add_parquet_key('k', '0123456789112345')",
        "IMPORT DATABASE '/tmp'",
        "CHECKPOINT",
        "FORCE CHECKPOINT",
        "VACUUM",
        "ANALYZE",
        "PREPARE p AS DELETE FROM orders",
        "COMMENT ON TABLE orders IS 'changed'",
        "CREATE SECRET s (TYPE s3, KEY_ID 'x', SECRET 'y')",
        "UPDATE EXTENSIONS",
    ],
)
def test_statements_that_change_anything_are_refused(tools, query):
    before = state(tools)
    out = tools.sql(query)
    assert out.startswith("Error:"), out
    assert state(tools) == before
    assert not os.path.exists("/tmp/ct-leak.csv")


def test_reads_and_explain_of_reads_still_work(tools):
    assert "(1 row)" in tools.sql("EXPLAIN ANALYZE SELECT count(*) FROM orders")
    assert "physical_plan" in tools.sql("EXPLAIN SELECT region FROM orders")
    assert "Error" not in tools.sql("/* c */ EXPLAIN ANALYZE SELECT 1 -- end")
    assert "revenue" in tools.sql("PRAGMA table_info('orders')")
    assert "v" in tools.sql("PRAGMA version")
    assert "orders" in tools.sql("PRAGMA show_tables")
    assert "revenue" in tools.sql("CALL pragma_table_info('orders')")
    assert "(3 rows)" in tools.sql("FROM orders SELECT DISTINCT region")
    assert "eu" in tools.sql("PIVOT orders ON region IN ('eu', 'us') USING sum(units)")


def test_the_database_is_read_only(tools):
    """The second line of defence: the episode's database itself is opened read-only."""
    out = tools.sql(
        "SELECT database_name, readonly FROM duckdb_databases() "
        "WHERE NOT internal AND database_name <> 'temp'"
    )
    rows = [line.split("|") for line in out.splitlines()[2:-1]]
    assert rows and all(r[1].strip() == "True" for r in rows), out


def test_a_write_past_the_check_fails_on_the_read_only_database(tmp_path):
    """Were a write to get past the statement check, DuckDB itself refuses it."""
    import duckdb

    from causaltrace.tools import EpisodeData
    from causaltrace.tools.sql import build_database
    from causaltrace.tools.sql_worker import Worker

    visible = make_episode(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    build_database(EpisodeData.from_dir(visible), data / "episode.duckdb", tools_config())
    worker = Worker({"data_dir": str(data), "threads": 1, "memory_limit": "256MB"} | ROWS)
    assert worker.load({"database": "episode.duckdb", "tables": ["orders", "customers"]})["ok"]
    for statement in (
        "DROP TABLE orders",
        "DELETE FROM orders",
        "INSERT INTO orders SELECT * FROM orders",
        "CREATE TABLE x AS SELECT 1",
        "CREATE MACRO m(x) AS x",
        "EXPLAIN ANALYZE DROP TABLE orders",
    ):
        with pytest.raises(duckdb.Error, match="read-only"):
            worker.con.execute(statement)
    assert worker.con.execute("SELECT count(*) FROM orders").fetchone() == (400,)
    worker.con.close()


def test_episodes_of_one_prompt_share_one_read_only_database_file(tmp_path, monkeypatch):
    """A rollout group (several live episodes on the same files) shares one database file,
    built once by the host; it is read-only, kept for later episodes of the same files, and
    evicted (least recently used first) past the cache's limit."""
    import causaltrace.tools.sql as sql_module

    monkeypatch.setattr(sql_module, "KEEP_FILES", 1)
    visible, other = make_episode(tmp_path), make_episode(tmp_path, "other", rows=300)

    async def main():
        async with ToolRuntime(tools_config(warm_workers=2)) as runtime:
            databases = runtime.sql_pool.databases
            a = await runtime.episode(visible).start(wait=True)
            b = await runtime.episode(visible).start(wait=True)
            files = list(databases.root.glob("*.duckdb"))
            assert len(files) == 1 and files[0].stat().st_mode & 0o222 == 0
            for tools in (a, b):
                assert "400" in await tools.sql("SELECT count(*) FROM orders")
            await a.close()
            await b.close()
            assert files[0].exists() and databases.builds == 1  # kept for the next episode
            async with runtime.episode(visible) as c:
                assert "400" in await c.sql("SELECT count(*) FROM orders")
            assert databases.builds == 1
            async with runtime.episode(other) as d:
                assert "300" in await d.sql("SELECT count(*) FROM orders")
            assert not files[0].exists() and len(list(databases.root.glob("*.duckdb"))) == 1

    asyncio.run(main())


# -- D2: hard limits, in a separate process -----------------------------------------------
def running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_query_that_ignores_interrupt_is_stopped_at_the_time_limit(tools):
    pids = tools.tools._sql._process.pids()  # the launcher and the DuckDB worker below it
    assert len(pids) >= 2
    t0 = time.monotonic()
    out = tools.sql(STUCK)
    elapsed = time.monotonic() - t0
    assert out.startswith("Error:") and "time limit" in out, out
    assert elapsed < TIMEOUT + MARGIN, f"answered after {elapsed:.1f} s"
    # Stopped for real: no process of the stuck worker goes on using CPU and memory.
    deadline = time.monotonic() + 2.0
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(p) for p in pids), [p for p in pids if running(p)]
    # The next query gets a fresh worker with the same tables, without waiting for the stuck one.
    t0 = time.monotonic()
    assert "400" in tools.sql("SELECT count(*) FROM orders")
    assert time.monotonic() - t0 < TIMEOUT, "the episode's next query waited for the stuck one"
    assert tools.tools._sql.restarts >= 1


def test_a_stuck_query_delays_no_other_episode(tmp_path):
    """Two episodes are stuck (as many as the old shared SQL thread pool had threads); a third
    episode's simple query still answers within about a second."""
    dirs = [make_episode(tmp_path, f"ep{i}") for i in range(3)]

    async def main():
        config = tools_config(sql_timeout=TIMEOUT, warm_workers=3)
        async with ToolRuntime(config) as runtime:
            episodes = [runtime.episode(d) for d in dirs]
            for episode in episodes:
                await episode.start(wait=True)
            stuck = [asyncio.create_task(e.sql(STUCK)) for e in episodes[:2]]
            await asyncio.sleep(0.5)  # both are running their query now
            t0 = time.monotonic()
            out = await episodes[2].sql("SELECT count(*) AS n FROM orders")
            prompt = time.monotonic() - t0
            stopped = await asyncio.gather(*stuck)
            for episode in episodes:
                await episode.close()
            return out, prompt, stopped

    out, prompt, stopped = asyncio.run(main())
    assert "400" in out
    assert prompt < 1.0, f"the bystander's query took {prompt:.2f} s"
    assert all(s.startswith("Error:") and "time limit" in s for s in stopped), stopped


HOST_SCRIPT = """
import asyncio, json, sys, time
sys.path.insert(0, {tests!r})
from _tools_support import tools_config
from causaltrace.tools import ToolRuntime

def rss():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

async def main():
    config = tools_config(sql_timeout={timeout}, warm_workers=1)
    async with ToolRuntime(config) as runtime:
        async with runtime.episode({episode!r}) as tools:
            await tools.ready()
            print(json.dumps({{"ready": rss()}}), flush=True)
            t0 = time.monotonic()
            out = await tools.sql({query!r})
            elapsed = time.monotonic() - t0
            after = await tools.sql("SELECT count(*) FROM orders")
            print(json.dumps({{"out": out, "elapsed": elapsed, "after": after, "rss": rss()}}),
                  flush=True)

asyncio.run(main())
"""


@pytest.mark.parametrize("query", [HUGE, STUCK], ids=["unnest-huge", "list-distinct"])
def test_the_host_process_does_not_grow(tmp_path, query):
    """The query runs in a trainer-like host process (a subprocess here), whose resident memory
    is watched from outside; the watcher kills it if it grows by more than the SQL memory limit
    (1 GB), so that the old behaviour fails this test instead of exhausting the machine."""
    limit = 10**9
    script = HOST_SCRIPT.format(
        tests=str(TESTS), timeout=TIMEOUT, episode=str(make_episode(tmp_path)), query=query
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = json.loads(proc.stdout.readline())
        baseline, peak, grew_too_much = first["ready"], 0, False
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with open(f"/proc/{proc.pid}/status") as fh:
                    rss = next(int(x.split()[1]) * 1024 for x in fh if x.startswith("VmRSS:"))
            except (OSError, StopIteration):
                break
            peak = max(peak, rss)
            if rss - baseline > limit:
                grew_too_much = True
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None and (grew_too_much or time.monotonic() > deadline):
            proc.kill()
        stdout, stderr = proc.communicate(timeout=60)
    assert not grew_too_much, f"the host grew by {(peak - baseline) / 2**20:.0f} MiB"
    assert proc.returncode == 0, stderr[-3000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["out"].startswith("Error:"), result["out"]
    assert "memory" in result["out"] or "time limit" in result["out"], result["out"]
    assert result["elapsed"] < TIMEOUT + MARGIN, result
    assert "400" in result["after"]
    assert (max(peak, result["rss"]) - baseline) < 256 * 2**20, (peak, baseline)
