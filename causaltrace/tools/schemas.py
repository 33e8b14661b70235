"""OpenAI function-calling schemas of the agent tools: ``sql``, ``python`` and ``submit``.

Parameters are flat strings on purpose: verl's tool schema keeps only ``type``,
``description`` and ``enum`` of each property, so nested objects, arrays and numeric bounds
would be silently dropped. ``submit``'s handling (parsing, scoring) belongs to the
environment; this module only declares its schema.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

SQL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "sql",
        "description": (
            "Run a read-only DuckDB SQL query over this episode's tables and return the result "
            "as a text table. One table per dataset file; use SHOW TABLES, DESCRIBE <table> or "
            "SUMMARIZE <table> to explore. Only queries (SELECT/WITH/DESCRIBE/SHOW/SUMMARIZE/"
            "EXPLAIN/PRAGMA) are allowed; files, the network and settings are not reachable. "
            "Long results are cut: aggregate or add LIMIT."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "The DuckDB SQL query (several may be separated by ';').",
                }
            },
            "required": ["query"],
        },
    },
}

PYTHON_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "python",
        "description": (
            "Execute Python code in a persistent namespace (like a notebook: variables survive "
            "between calls) and return what it prints plus the value of a final expression. "
            "pandas (pd), numpy (np), scipy and duckdb are available; each table is preloaded "
            "as a pandas DataFrame named after it (also in the dict `tables`), and "
            "`data_dictionary` holds the column descriptions. The working directory holds the "
            "episode's Parquet files. There is no network access. A call that runs too long is "
            "stopped and the namespace restarted (variables are lost, tables reloaded)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "Python source code to execute.",
                }
            },
            "required": ["code"],
        },
    },
}

SUBMIT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit",
        "description": (
            "Submit the final diagnosis and end the episode. Call it exactly once, when the "
            "investigation is done."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "diagnosis": {
                    "type": "string",
                    "description": (
                        "The diagnosis in the format the task prompt asks for (for example a "
                        "JSON object with the root cause, the affected slice and the onset)."
                    ),
                }
            },
            "required": ["diagnosis"],
        },
    },
}

_BY_NAME = {"sql": SQL_TOOL, "python": PYTHON_TOOL, "submit": SUBMIT_TOOL}


def tool_schemas(names: Sequence[str] = ("sql", "python", "submit")) -> list[dict[str, Any]]:
    """Deep copies of the named schemas, in order (callers may edit them freely)."""
    unknown = [n for n in names if n not in _BY_NAME]
    if unknown:
        raise KeyError(f"unknown tool names {unknown}; known: {sorted(_BY_NAME)}")
    return [copy.deepcopy(_BY_NAME[n]) for n in names]
