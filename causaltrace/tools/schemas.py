"""The agent tools' declarations: one :class:`ToolSpec` per tool, rendered wherever tools are
described (OpenAI function-calling schemas for the harness and the SFT export, Python
signatures and docstrings for TRL, verl's tool config).

Parameters are flat (a string, optionally with an ``enum``) on purpose: verl's tool schema keeps
only ``type``, ``description`` and ``enum`` of each property, and TRL builds schemas from type
hints and docstrings, so nested objects, arrays and numeric bounds would be dropped by one
trainer and kept by another. ``submit`` depends on the domain (its causes), so its spec is built
by :func:`causaltrace.env.contract.submit_spec`; this module declares ``sql`` and ``python``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Param:
    """One string parameter of a tool; ``enum`` lists its allowed values, if closed."""

    name: str
    description: str
    enum: tuple[str, ...] | None = None
    required: bool = True

    def openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string", "description": self.description}
        if self.enum is not None:
            out["enum"] = list(self.enum)
        return out


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description, parameters."""

    name: str
    description: str
    params: tuple[Param, ...]

    def openai(self) -> dict[str, Any]:
        """The OpenAI function-calling schema (a fresh dict: callers may edit it)."""
        parameters: dict[str, Any] = {
            "type": "object",
            "properties": {p.name: p.openai() for p in self.params},
        }
        required = [p.name for p in self.params if p.required]
        if required:  # omitted when empty, as transformers' get_json_schema renders it
            parameters["required"] = required
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }


SQL_SPEC = ToolSpec(
    "sql",
    "Run a read-only DuckDB SQL query over this episode's tables and return the result as a "
    "text table. One table per dataset file; use SHOW TABLES, DESCRIBE <table> or SUMMARIZE "
    "<table> to explore. Only queries (SELECT/WITH/DESCRIBE/SHOW/SUMMARIZE/EXPLAIN/PRAGMA) are "
    "allowed; files, the network and settings are not reachable. Long results are cut: "
    "aggregate or add LIMIT.",
    (Param("query", "The DuckDB SQL query (several may be separated by ';')."),),
)

PYTHON_SPEC = ToolSpec(
    "python",
    "Execute Python code in a persistent namespace (like a notebook: variables survive between "
    "calls) and return what it prints plus the value of a final expression. pandas (pd), numpy "
    "(np), scipy and duckdb are available; each table is preloaded as a pandas DataFrame named "
    "after it (also in the dict `tables`), and `data_dictionary` holds the column descriptions. "
    "There is no network access. A call that runs too long is stopped and the namespace "
    "restarted (variables are lost, tables reloaded).",
    (Param("code", "Python source code to execute."),),
)

SQL_TOOL: dict[str, Any] = SQL_SPEC.openai()
PYTHON_TOOL: dict[str, Any] = PYTHON_SPEC.openai()

_BY_NAME = {"sql": SQL_SPEC, "python": PYTHON_SPEC}


def tool_schemas(names: Sequence[str] = ("sql", "python")) -> list[dict[str, Any]]:
    """Fresh OpenAI schemas of the named data tools, in order (``submit`` is per domain: see
    :func:`causaltrace.env.contract.submit_spec`).

    Args:
        names: The tools, from ``sql`` and ``python``; both by default.

    Raises:
        KeyError: A name is not a data tool.
    """
    unknown = [n for n in names if n not in _BY_NAME]
    if unknown:
        raise KeyError(
            f"unknown tool names {unknown}; known: {sorted(_BY_NAME)} (submit depends on the "
            "domain: causaltrace.env.contract.ToolContract)"
        )
    return [_BY_NAME[n].openai() for n in names]
