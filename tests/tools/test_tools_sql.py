"""The sql tool: results, caps, read-only, and adversarial SQL that tries to leave the episode.

Each test drives a :class:`SqlTool` (the episode's sandboxed DuckDB worker) on the event loop of
one shared runtime; :mod:`test_hardening_sql` covers the limits (time, memory, isolation)."""

from __future__ import annotations

import dataclasses
import os

import pandas as pd
import pytest
from _tools_support import LABEL, SEED, make_episode, tools_config

from causaltrace.tools import EpisodeData, SyncToolRuntime, ToolError
from causaltrace.tools.sql import SqlTool, parse_size, render_table, sql_limits

pytestmark = pytest.mark.sandbox


class SyncSql:
    """A blocking handle of one episode's sql tool on ``owner``'s event loop."""

    def __init__(self, owner: SyncToolRuntime, episode_dir, **overrides):
        runtime = owner.runtime
        config = dataclasses.replace(runtime.config, **overrides)
        self.owner = owner
        self.tool = SqlTool(runtime.sql_pool, EpisodeData.from_dir(episode_dir), config)
        owner.run(self.tool.ready())

    def run(self, query: str) -> str:
        return self.owner.run(self.tool.run(query))

    def close(self) -> None:
        self.owner.run(self.tool.close())


@pytest.fixture(scope="module")
def owner():
    runtime = SyncToolRuntime(tools_config(warm_workers=1, sql_max_rows=20, sql_max_chars=4000))
    yield runtime
    runtime.close()


@pytest.fixture
def episode_dir(tmp_path):
    return make_episode(tmp_path)


@pytest.fixture
def sql(owner, episode_dir):
    tool = SyncSql(owner, episode_dir)
    yield tool
    tool.close()


def test_query_renders_a_text_table(sql):
    out = sql.run("SELECT region, count(*) AS n FROM orders GROUP BY region ORDER BY region")
    lines = out.splitlines()
    assert lines[0].split("|")[0].strip() == "region"
    assert "apac" in out and "eu" in out and "us" in out
    assert out.endswith("(3 rows)")


def test_introspection_statements_work(sql):
    assert "customers" in sql.run("SHOW TABLES") and "orders" in sql.run("SHOW TABLES")
    assert "revenue" in sql.run("DESCRIBE orders")
    assert "revenue" in sql.run("SUMMARIZE orders")
    assert "revenue" in sql.run("PRAGMA table_info('orders')")
    assert "Error" not in sql.run("EXPLAIN SELECT * FROM orders")
    assert "Error" not in sql.run("PIVOT orders ON region IN ('eu', 'us') USING sum(units)")


def test_row_cap_says_output_was_cut(sql):
    out = sql.run("SELECT * FROM orders")
    assert "[output truncated: showing the first 20 rows" in out
    assert len(out.splitlines()) == 2 + 20 + 1


def test_character_cap_says_output_was_cut(sql):
    out = sql.run("SELECT repeat('x', 190) AS a, repeat('y', 190) AS b FROM orders LIMIT 20")
    assert len(out) < 4000 + 200
    assert "[output truncated: showing the first 4000 of" in out


def test_errors_come_back_as_text(sql):
    assert sql.run("SELEC 1").startswith("Error: Parser Error")
    assert sql.run("SELECT nope FROM orders").startswith("Error: Binder Error")
    assert sql.run("SELECT * FROM missing_table").startswith("Error: Catalog Error")
    assert sql.run("   ") == "Error: the query is empty."
    assert "at most 1000000" in sql.run("SELECT 1 " + " " * 1_000_000)
    assert "1" in sql.run("SELECT 1")  # still usable


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE orders",
        "DELETE FROM orders",
        "UPDATE orders SET revenue = 0",
        "INSERT INTO orders SELECT * FROM orders",
        "CREATE TABLE t AS SELECT 1",
        "CREATE TEMP TABLE t AS SELECT 1",
        "ALTER TABLE orders ADD COLUMN x INT",
        "CREATE MACRO m(x) AS x + 1",
        "ATTACH ':memory:' AS other",
        "SET threads = 8",
        "BEGIN TRANSACTION",
        "PIVOT orders ON region USING sum(units)",
        "SELECT 1; DROP TABLE orders",
    ],
)
def test_writes_are_refused_and_tables_unchanged(sql, query):
    before = sql.run("SELECT count(*), sum(revenue) FROM orders")
    out = sql.run(query)
    assert out.startswith("Error:") and "read-only" in out
    assert sql.run("SELECT count(*), sum(revenue) FROM orders") == before


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('{labels}')",
        "SELECT * FROM read_json('{labels}')",
        "SELECT * FROM read_text('{labels}')",
        "SELECT * FROM read_blob('{labels}')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_csv('/etc/passwd', sep=':')",
        "SELECT * FROM read_text('/proc/self/environ')",
        "SELECT * FROM glob('{parent}/*')",
        "SELECT * FROM glob('/*')",
        "SELECT * FROM read_parquet('{episode}/orders.parquet')",
        "SELECT * FROM '{labels}'",
        "SELECT * FROM parquet_metadata('{episode}/orders.parquet')",
        "SELECT * FROM sniff_csv('{labels}')",
        "COPY orders TO '{parent}/leak.csv'",
        "COPY (SELECT 1) TO '/tmp/leak.csv'",
        "EXPORT DATABASE '{parent}/dump'",
        "ATTACH '{parent}/other.duckdb' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "RESET enable_external_access",
        "SET lock_configuration = false",
        "PRAGMA enable_external_access = true",
        "SET allowed_directories = ['/']",
        "SET memory_limit = '100GB'",
        "SELECT getenv('CT_TEST_SECRET')",
        "SELECT * FROM host_labels",
        "SELECT * FROM duckdb_secrets()",
    ],
)
def test_adversarial_sql_fails_clearly(sql, episode_dir, query, monkeypatch):
    monkeypatch.setenv("CT_TEST_SECRET", LABEL)
    host_labels = pd.DataFrame({"label": [LABEL], "seed": [SEED]})  # noqa: F841 - a host variable
    labels = episode_dir.parent / "labels.jsonl"
    text = query.format(labels=labels, parent=episode_dir.parent, episode=episode_dir)
    out = sql.run(text)
    assert out.startswith("Error:"), out
    assert LABEL not in out and SEED not in out
    assert not (episode_dir.parent / "leak.csv").exists()
    assert not os.path.exists("/tmp/leak.csv")
    assert "(1 row)" in sql.run("SELECT count(*) FROM orders")  # the episode keeps working


def test_settings_are_locked(sql):
    out = sql.run(
        "SELECT name, value FROM duckdb_settings() WHERE name IN "
        "('enable_external_access', 'lock_configuration', 'python_enable_replacements')"
    )
    assert "enable_external_access     | false" in out
    assert "lock_configuration         | true" in out
    assert "python_enable_replacements | false" in out


def test_runaway_query_is_interrupted(owner, episode_dir):
    sql = SyncSql(owner, episode_dir, sql_timeout=0.5)
    try:
        out = sql.run("SELECT count(*) FROM range(100000000) a, range(100000000) b")
        assert out.startswith("Error:") and "interrupted after 0.5 s (time limit)" in out
        assert "(1 row)" in sql.run("SELECT 1")
        assert sql.tool.restarts == 0  # interrupted in its process, which lives on
    finally:
        sql.close()


def test_episodes_do_not_share_a_database(owner, tmp_path):
    a = SyncSql(owner, make_episode(tmp_path, "a"))
    other = make_episode(tmp_path, "b")
    (other / "secret_b.parquet").write_bytes((other / "customers.parquet").read_bytes())
    b = SyncSql(owner, other)
    try:
        assert "secret_b" in b.run("SHOW TABLES")
        assert "secret_b" not in a.run("SHOW ALL TABLES")
        assert a.run("SELECT * FROM secret_b").startswith("Error: Catalog Error")
    finally:
        a.close()
        b.close()


def test_episode_dir_contract(tmp_path):
    visible = make_episode(tmp_path)
    (visible / "notes.txt").write_text("ignored")
    data = EpisodeData.from_dir(visible)
    assert set(data.tables) == {"orders", "customers"}
    assert data.data_dictionary is not None and data.data_dictionary.name == "data_dictionary.json"
    os.symlink(tmp_path / "episode" / "labels.jsonl", visible / "labels.parquet")
    with pytest.raises(ToolError, match=r"labels\.parquet.*not a regular file"):
        EpisodeData.from_dir(visible)
    os.unlink(visible / "labels.parquet")
    (visible / "bad-name.parquet").write_bytes(b"")
    with pytest.raises(ToolError, match=r"bad-name\.parquet"):
        EpisodeData.from_dir(visible)
    with pytest.raises(ToolError, match="does not exist"):
        EpisodeData.from_dir(tmp_path / "nope")


def test_a_broken_table_file_is_a_tool_error_naming_it(owner, tmp_path):
    visible = make_episode(tmp_path)
    (visible / "broken.parquet").write_bytes(b"this is not parquet")
    with pytest.raises(ToolError, match=r"could not load.*broken\.parquet"):
        SyncSql(owner, visible)


def test_sizes_and_limits():
    assert parse_size("1GB") == 10**9 and parse_size("512MiB") == 512 * 2**20
    assert parse_size(" 2 gib ") == 2 * 2**30 and parse_size("1000") == 1000
    with pytest.raises(ToolError, match="sql_memory_limit"):
        parse_size("80%")
    limits = sql_limits(tools_config(sql_memory_limit="1GB"))
    assert limits["data_bytes"] == 2 * 10**9 and limits["file_bytes"] == 0


def test_render_table_formats_values():
    text = render_table(["a", "b"], [(None, 1.0 / 3), ("x\ny", 2)])
    assert "NULL" in text and "0.3333333333" in text and "x\\ny" in text
