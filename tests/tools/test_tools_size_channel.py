"""What the tables' storage says about their contents stays out of the agent's reach.

Compressed sizes follow contents: a Parquet file or a DuckDB segment of a column that a cause
zeroed is smaller, and ``causaltrace-audit``'s leakage probe read the cause from the stored
files' sizes alone at 0.34 (chance 0.09) on ads_test. So the python tool's sandbox holds no
table file once the worker has loaded them, and the sql tool refuses the functions that report
storage (and ``query()``, which would run them from a string). Two episodes with the same
schema and row counts but different contents must look the same through every such channel."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _tools_support import make_episode, tools_config

from causaltrace.tools import SyncToolRuntime

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def runtime():
    owner = SyncToolRuntime(tools_config(warm_workers=1))
    yield owner
    owner.close()


def constant_revenue(directory):
    """The same rows, but a revenue column a 'cause' zeroed (compresses to almost nothing)."""
    orders = pd.read_parquet(directory / "orders.parquet")
    orders["revenue"] = np.zeros(len(orders))
    orders.to_parquet(directory / "orders.parquet", index=False)
    return directory


def test_the_sandbox_holds_no_table_file_after_loading(runtime, tmp_path):
    normal = make_episode(tmp_path, "a", rows=4000, seed=1)
    zeroed = constant_revenue(make_episode(tmp_path, "b", rows=4000, seed=1))
    # The stored files differ in size (the channel exists on the host) ...
    assert (normal / "orders.parquet").stat().st_size != (zeroed / "orders.parquet").stat().st_size
    listings = []
    for directory in (normal, zeroed):
        with runtime.episode(directory) as tools:
            listing = tools.python(
                "import os\nsorted((n, os.stat(n).st_size) for n in os.listdir('/episode'))"
            )
            # ... the tables are still there to analyse, as DataFrames.
            assert tools.python("len(orders), sorted(tables)") == (
                "(4000, ['customers', 'orders'])"
            )
            listings.append(listing)
    assert ".parquet" not in listings[0]
    assert listings[0] == listings[1]  # only the data dictionary, of the same size


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM pragma_storage_info('orders')",
        "SELECT count(*) FROM storage_info('orders')",
        'SELECT * FROM "PRAGMA_DATABASE_SIZE"()',
        "CALL pragma_database_size()",
        "PRAGMA storage_info('orders')",
        "PRAGMA database_size",
        "SELECT * FROM duckdb_memory()",
        "SELECT * FROM query('SELECT * FROM pragma_storage_info(''orders'')')",
        "SELECT 1 AS x, /* hidden */ storage_info /* call */ ('orders')",
        # Issue 42: by indirection, and functions no list of names foresaw. The allow-list
        # of table functions is checked on DuckDB's parse tree, so neither reaches execution.
        "SELECT * FROM json_execute_serialized_sql(json_serialize_sql("
        "'SELECT * FROM pragma_storage_info(''orders'')'))",
        "SELECT * FROM duckdb_live_query_metrics()",
        "SELECT * FROM duckdb_eviction_queues()",
        "CALL duckdb_eviction_queues()",
        "SUMMARIZE SELECT * FROM pragma_storage_info('orders')",
        "EXPLAIN SELECT * FROM main.\"Pragma_Storage_Info\"('orders')",
        "SELECT * FROM orders WHERE revenue > (SELECT count(*) FROM duckdb_blocks())",
        "WITH s AS (FROM pragma_metadata_info()) SELECT count(*) FROM s",
    ],
)
def test_the_sql_tool_refuses_storage_introspection(runtime, tmp_path, query):
    with runtime.episode(make_episode(tmp_path)) as tools:
        out = tools.sql(query)
    assert out.startswith("Error:") and ("not available" in out or "not allowed" in out), out


def test_names_that_only_look_like_those_functions_still_work(runtime, tmp_path):
    with runtime.episode(make_episode(tmp_path)) as tools:
        out = tools.sql("SELECT 'storage_info(' AS query, count(*) AS n FROM orders")
    assert "storage_info(" in out and "400" in out, out


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*) FROM range(3)",
        "SELECT count(*) FROM generate_series(1, 3)",
        "SELECT count(*) FROM unnest([1, 2, 3])",
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'orders'",
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders'",
        "CALL pragma_table_info('orders')",
        "SELECT count(*) FROM (DESCRIBE orders)",
        "SELECT count(*) FROM (SUMMARIZE orders)",
    ],
)
def test_the_allow_list_keeps_what_an_analyst_reads(runtime, tmp_path, query):
    """Table functions an analyst uses to generate rows or read the catalog still run."""
    with runtime.episode(make_episode(tmp_path)) as tools:
        out = tools.sql(query)
    assert not out.startswith("Error:"), out
