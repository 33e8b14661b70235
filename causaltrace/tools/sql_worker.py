"""The in-sandbox process of the ``sql`` tool: one read-only DuckDB database per episode.

The host (``causaltrace/tools/sql.py``) runs this file as a script (``python -I -S -B``) in a
sandbox built by the same launcher as the ``python`` tool, with only the ``duckdb`` distribution
visible: it imports only the standard library, ``worker_protocol`` (bound beside it: the pipe
protocol, limits and serve loop the Python worker uses too) and ``duckdb``, never
``causaltrace`` (which is not importable there).

Lifecycle: apply resource limits (address space, data, CPU time, open files, processes; no file
may be written at all), import DuckDB, answer ``{"op": "ready"}`` (the worker is now *warm*);
then exactly one ``load``: the episode's DuckDB database file, built by the host from the
episode's Parquet files and hard-linked into the sandbox's read-only data directory, is opened
**read-only**, with external access off and the configuration locked. Then any number of
``query`` requests.

Every statement of a query is checked by DuckDB's own parser before anything runs, recursively
(the statement an ``EXPLAIN [ANALYZE]`` wraps is checked like a top-level one): only reads and
introspection pass. The read-only database is the second line: a write that got past the check
would still fail. A query past its time limit is interrupted by a watchdog thread; DuckDB
functions that ignore interrupts are handled by the host, which kills this process.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import json
import os
import re
import sys
import threading
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

if __package__:  # imported on the host, as part of causaltrace.tools
    from causaltrace.tools import worker_protocol as protocol
else:  # run as a script in the sandbox: only the worker files are bound beside this one
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import worker_protocol as protocol

    del sys.path[0]

_MAX_REQUEST = 16 * 1024 * 1024
_MAX_CELL_CHARS = 200
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Top-level statement types that may run. SHOW, DESCRIBE, SUMMARIZE, FROM-first, VALUES,
# UNPIVOT and PIVOT ... IN (...) parse as SELECT; CALL runs a table function (what
# SELECT * FROM f() runs); EXPLAIN and PRAGMA are checked further below.
ALLOWED_TYPES = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL"})
# PRAGMA functions that only read. Every other PRAGMA (settings, checkpoints, imports, keys)
# is refused even though the locked configuration and the read-only database would stop it.
READ_PRAGMAS = frozenset(
    {
        "collations",
        "database_list",
        "functions",
        "platform",
        "show",
        "show_databases",
        "show_tables",
        "show_tables_expanded",
        "table_info",
        "user_agent",
        "version",
    }
)
# Functions that report how the database is stored or cached (blocks, segments and their
# compression, memory by component): those follow the tables' contents (a constant column is
# stored as one value), so a policy could read the cause from them without reading the data.
# ``query`` and ``query_table`` run SQL given as a string, which the token check cannot see into.
STORAGE_FUNCTIONS = frozenset(
    {
        "database_size",
        "pragma_database_size",
        "storage_info",
        "pragma_storage_info",
        "metadata_info",
        "pragma_metadata_info",
        "duckdb_memory",
        "duckdb_temporary_files",
        "duckdb_blocks",
        "query",
        "query_table",
    }
)
# The table functions a query may read from, by name after DuckDB parses it (what executes, not
# the text: ``json_execute_serialized_sql(json_serialize_sql('...'))`` ran a refused function
# that no token of the text names, and new introspection functions such as
# ``duckdb_eviction_queues()`` appear with DuckDB releases). Every other table function is
# refused; views over the catalog (information_schema, duckdb_tables, pg_catalog) stay readable.
TABLE_FUNCTIONS = frozenset(
    {
        "range",
        "generate_series",
        "unnest",
        "json_each",
        "json_tree",
        "duckdb_columns",
        "duckdb_constraints",
        "duckdb_databases",
        "duckdb_functions",
        "duckdb_keywords",
        "duckdb_schemas",
        "duckdb_settings",
        "duckdb_tables",
        "duckdb_types",
        "duckdb_views",
        *(f"pragma_{name}" for name in READ_PRAGMAS),
    }
)
# Functions that run SQL given as a value: refused wherever they appear.
EXECUTORS = frozenset({"query", "query_table", "json_execute_serialized_sql"})
FUNCTION_HINT = (
    "Error: {name}() is not available in the sql tool (table functions other than {allowed}, "
    "functions that report how the tables are stored, and SQL run from a string are refused); "
    "query the tables themselves."
)
STORAGE_HINT = (
    "Error: {name}() is not available in the sql tool (functions that report how the tables "
    "are stored, and SQL passed as a string, are refused); query the tables themselves."
)
PIVOT_HINT = (
    "Error: PIVOT without an IN list creates a type, and the sql tool is read-only; "
    "name the pivoted values: PIVOT t ON col IN ('a', 'b') USING sum(x)."
)
READ_ONLY_HINT = (
    "Use SELECT (with WITH, JOIN, GROUP BY, window functions...), DESCRIBE, SHOW TABLES, "
    "SUMMARIZE, EXPLAIN [ANALYZE] SELECT ... or PRAGMA table_info('t')."
)
_MAX_DEPTH = 4
_warm = False  # set by warm()


class Refused(Exception):
    """A statement the sql tool does not run; the message is what the agent reads."""


# -- statement checks (also imported by the host's tests) ---------------------------------------
def _tokens(text: str) -> list[tuple[int, str, str]]:
    """(offset, kind, text) of each non-comment token, by DuckDB's own tokenizer."""
    # lazy: the sandboxed worker imports after its resource limits
    import duckdb

    raw = duckdb.tokenize(text)
    out = []
    for i, (offset, kind) in enumerate(raw):
        end = raw[i + 1][0] if i + 1 < len(raw) else len(text)
        if kind.name != "comment":
            out.append((offset, kind.name, text[offset:end].strip()))
    return out


def _explained(text: str) -> str:
    """The statement an ``EXPLAIN [ANALYZE | ANALYSE] [(options)]`` wraps, as text."""
    tokens = _tokens(text)
    if not tokens or tokens[0][2].upper() != "EXPLAIN":
        raise Refused("Error: this EXPLAIN statement could not be read, so it was not run.")
    i = 1
    if i < len(tokens) and tokens[i][2].upper() in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(tokens) and tokens[i][2] == "(":
        depth = 0
        while i < len(tokens):
            if tokens[i][2] == "(":
                depth += 1
            elif tokens[i][2] == ")":
                depth -= 1
                if depth == 0:
                    i += 1
                    break
            i += 1
    if i >= len(tokens):
        raise Refused("Error: EXPLAIN needs a statement to explain.")
    return text[tokens[i][0] :]


def _first_word(text: str) -> str:
    tokens = _tokens(text)
    return tokens[0][2].upper() if tokens else ""


def _pragma_name(text: str) -> str:
    tokens = _tokens(text)
    if len(tokens) < 2 or tokens[0][2].upper() != "PRAGMA":
        return ""
    return tokens[1][2].strip('"').lower()


def _refuse(types: Sequence[str]) -> Refused:
    if list(types) == ["MULTI"]:
        return Refused(PIVOT_HINT)
    names = ", ".join(sorted(set(types)))
    return Refused(
        f"Error: the sql tool is read-only; {names} statements are not allowed. {READ_ONLY_HINT}"
    )


def _refuse_storage_functions(text: str) -> None:
    """Refuse a call of a :data:`STORAGE_FUNCTIONS` function anywhere in ``text`` (a name
    token, quoted or not, followed by an opening parenthesis)."""
    tokens = _tokens(text)
    for (_, kind, word), nxt in itertools.pairwise(tokens):
        if kind in ("identifier", "keyword") and nxt[2] == "(":
            name = word.strip('"').lower()
            if name in STORAGE_FUNCTIONS:
                raise Refused(STORAGE_HINT.format(name=name))


def _functions(con, text: str) -> tuple[set[str], set[str]]:
    """The table functions and all functions one SELECT statement calls, from DuckDB's own
    parse tree (``json_serialize_sql``): names in any case, quoting or schema, in subqueries,
    CTEs, DESCRIBE and SUMMARIZE, as the binder will resolve them."""
    tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [text]).fetchone()[0])
    if tree.get("error"):
        raise Refused("Error: this statement could not be read, so it was not run.")
    tables: set[str] = set()
    called: set[str] = set()
    stack: list[Any] = [tree]
    while stack:  # iterative: a deeply nested statement cannot exhaust the recursion limit
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "TABLE_FUNCTION" and isinstance(node.get("function"), dict):
                tables.add(str(node["function"].get("function_name", "")).lower())
            if "function_name" in node:
                called.add(str(node["function_name"]).lower())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return tables, called


def _function_refused(name: str) -> Refused:
    allowed = ", ".join(sorted(n for n in TABLE_FUNCTIONS if not n.startswith("pragma_")))
    return Refused(FUNCTION_HINT.format(name=name or "?", allowed=allowed))


def _refuse_call(text: str) -> None:
    """``CALL [schema.]f(...)`` runs the table function ``f``: the same allow-list."""
    name = next(
        (
            word.strip('"').lower()
            for (_, kind, word), nxt in itertools.pairwise(_tokens(text))
            if kind in ("identifier", "keyword") and nxt[2] == "("
        ),
        "",
    )
    if name not in TABLE_FUNCTIONS:
        raise _function_refused(name)


def _refuse_functions(con, text: str) -> None:
    """Refuse a SELECT that reads a table function outside :data:`TABLE_FUNCTIONS` or calls a
    storage function or an executor anywhere."""
    tables, called = _functions(con, text)
    refused = sorted((tables - TABLE_FUNCTIONS) | (called & (STORAGE_FUNCTIONS | EXECUTORS)))
    if refused:
        raise _function_refused(refused[0])


def check_statements(con, text: str, depth: int = 0, inner: bool = False) -> list:
    """The parsed statements of ``text`` if every one (and every statement nested in one) may
    run; raise :class:`Refused` otherwise. Parse errors propagate as ``duckdb.Error``.

    ``inner`` is set for the statement an EXPLAIN wraps: only a SELECT may be explained.
    """
    if depth > _MAX_DEPTH:
        raise Refused("Error: statements are nested too deeply.")
    _refuse_storage_functions(text)
    statements = con.extract_statements(text)
    types = [s.type.name for s in statements]
    allowed = frozenset({"SELECT"}) if inner else ALLOWED_TYPES
    refused = [t for t in types if t not in allowed]
    if refused:
        raise _refuse(refused)
    for statement in statements:
        kind = statement.type.name
        if kind == "SELECT":
            _refuse_functions(con, statement.query)
        if kind == "EXPLAIN":
            wrapped = check_statements(con, _explained(statement.query), depth + 1, inner=True)
            if len(wrapped) != 1:
                raise Refused("Error: EXPLAIN explains exactly one statement.")
        elif kind == "CALL" and _first_word(statement.query) != "CALL":
            # CHECKPOINT and FORCE CHECKPOINT parse as CALL: they are not table functions.
            raise Refused(
                f"Error: the sql tool is read-only; {_first_word(statement.query) or '?'} "
                f"statements are not allowed. {READ_ONLY_HINT}"
            )
        elif kind == "CALL":
            _refuse_call(statement.query)
        elif kind == "PRAGMA":
            name = _pragma_name(statement.query)
            if name not in READ_PRAGMAS:
                raise Refused(
                    f"Error: the sql tool is read-only; PRAGMA {name or '?'} is not allowed "
                    f"(allowed: {', '.join(sorted(READ_PRAGMAS))}). {READ_ONLY_HINT}"
                )
    return statements


# -- rendering ----------------------------------------------------------------------------------
def format_value(value: Any) -> str:
    """One cell as text: NULL for missing, 10 significant digits for floats."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat(sep=" ") if isinstance(value, _dt.datetime) else value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = repr(bytes(value))
    else:
        text = str(value)
    text = text.replace("\n", "\\n")
    if len(text) > _MAX_CELL_CHARS:
        text = text[: _MAX_CELL_CHARS - 1] + "…"
    return text


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table: a header, a rule, one line per row, columns padded to width."""
    cells = [[format_value(v) for v in row] for row in rows]
    header = [format_value(c) for c in columns]
    widths = [len(h) for h in header]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines.append("-+-".join("-" * w for w in widths))
    lines.extend(" | ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)
    return "\n".join(lines)


TIME_LIMIT_HINT = "Aggregate earlier, filter, or avoid large joins and huge lists."


def error_text(exc: BaseException, timeout: float | None = None) -> str:
    """What the agent reads for a failed statement. DuckDB's advice to raise settings is cut:
    the settings are locked."""
    # lazy: the sandboxed worker imports after its resource limits
    import duckdb

    message = str(exc).strip() or type(exc).__name__
    message = message.split("\n\nPossible solutions:")[0].strip()
    if isinstance(exc, duckdb.InterruptException):
        after = f" after {timeout:g} s" if timeout else ""
        message = f"the query was interrupted{after} (time limit). {TIME_LIMIT_HINT}"
    elif isinstance(exc, MemoryError):
        message = "the query ran out of memory (the sql tool's memory limit)"
    elif isinstance(exc, duckdb.OutOfMemoryException):
        message += " (the sql tool's memory limit: aggregate or filter earlier)"
    return f"Error: {message}"


# -- the process --------------------------------------------------------------------------------
class _Watchdog:
    """Interrupts the running query at its deadline (one thread for the worker's life)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._con = None
        threading.Thread(target=self._run, name="sql-watchdog", daemon=True).start()

    def arm(self, con, timeout: float | None) -> None:

        with self._cond:
            self._con = con
            self._deadline = None if timeout is None else time.monotonic() + timeout
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None

    def _run(self) -> None:

        while True:
            with self._cond:
                while self._deadline is None:
                    self._cond.wait()
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._deadline = None
                with contextlib.suppress(Exception):
                    self._con.interrupt()


class Worker:
    """The read-only DuckDB database of one episode."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.data_dir = config["data_dir"]
        self.max_rows = int(config["max_rows"])
        self.max_chars = int(config["max_chars"])
        self.db_path: str | None = None
        self.con = None
        self.watchdog: _Watchdog | None = None

    def ready(self) -> dict:
        if not _warm:
            warm()
        return protocol.greeting()

    def load(self, request: dict) -> dict:
        """Open the episode's database file (built by the host) read-only, then lock it down."""
        # lazy: the sandboxed worker imports after its resource limits
        import duckdb

        if self.con is not None:
            return {"ok": False, "error": "this worker already serves an episode"}
        name = str(request.get("database") or "")
        tables = sorted(str(t) for t in request.get("tables") or [])
        if not _TABLE_NAME.fullmatch(name.removesuffix(".duckdb")) or not tables:
            return {"ok": False, "error": f"bad load request {name!r} {tables!r}"}
        path = os.path.join(self.data_dir, name)
        c = self.config
        settings = {"threads": int(c["threads"]), "memory_limit": str(c["memory_limit"])}
        con = duckdb.connect(path, read_only=True, config=settings)
        try:
            for statement in (
                "SET enable_progress_bar = false",  # it would print
                "SET python_enable_replacements = false",
                "SET autoinstall_known_extensions = false",
                "SET autoload_known_extensions = false",
                "SET allow_community_extensions = false",
                "SET temp_directory = ''",
                "SET enable_external_access = false",
                "SET lock_configuration = true",
            ):
                con.execute(statement)
            found = sorted(
                row[0]
                for row in con.execute(
                    "SELECT table_name FROM duckdb_tables() WHERE NOT temporary"
                ).fetchall()
            )
        except BaseException:
            con.close()
            raise
        if found != tables:
            con.close()
            return {"ok": False, "error": f"the database holds tables {found}, not {tables}"}
        self.db_path = path
        self.con = con
        self.watchdog = _Watchdog()
        return {"ok": True, "bytes": os.path.getsize(path)}

    def query(self, request: dict) -> dict:
        if self.con is None:
            return {"ok": False, "error": "no episode is loaded"}
        text = request.get("query")
        if not isinstance(text, str) or not text.strip():
            return {"ok": True, "text": "Error: the query is empty."}
        con = self.con
        try:
            statements = check_statements(con, text)
        except Refused as exc:
            return {"ok": True, "text": str(exc)}
        except Exception as exc:  # a parse error; ValueError for a type the client lacks
            return {"ok": True, "text": error_text(exc)}
        if not statements:
            return {"ok": True, "text": "Error: the query holds no statement."}
        timeout = float(request["timeout"]) if request.get("timeout") else None
        parts: list[str] = []
        assert self.watchdog is not None
        self.watchdog.arm(con, timeout)
        try:
            for statement in statements:
                con.execute(statement)
                parts.append(self._render(con))
        except Exception as exc:  # duckdb.Error, MemoryError from a huge cell, ...
            parts.append(error_text(exc, timeout))
        finally:
            self.watchdog.disarm()
            with contextlib.suppress(Exception):
                con.abort()  # drop a half-read result and its memory
        text = "\n\n".join(parts)
        if len(text) > self.max_chars:
            text = (
                text[: self.max_chars]
                + f"\n[output truncated: showing the first {self.max_chars} of {len(text)} "
                "characters; select fewer columns or rows]"
            )
        return {"ok": True, "text": text}

    def _render(self, con) -> str:
        if con.description is None:
            return "OK (no result set)"
        columns = [d[0] for d in con.description]
        rows = con.fetchmany(self.max_rows + 1)
        more = len(rows) > self.max_rows
        rows = rows[: self.max_rows]
        text = render_table(columns, rows)
        if more:
            text += (
                f"\n[output truncated: showing the first {self.max_rows} rows; the result has more."
                " Aggregate, filter or add LIMIT/OFFSET to see other rows]"
            )
        else:
            text += f"\n({len(rows)} row{'s' if len(rows) != 1 else ''})"
        return text

    def memory(self, request: dict) -> dict:
        if self.con is None or self.db_path is None:
            return {"ok": True, "bytes": 0, "file_bytes": 0}
        row = self.con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()
        self.con.abort()
        return {
            "ok": True,
            "bytes": int(row[0] or 0) if row else 0,
            "file_bytes": os.path.getsize(self.db_path),
        }


def warm() -> None:
    """Import DuckDB and load its code (a fork server runs this once for all its workers)."""
    global _warm
    # lazy: the sandboxed worker imports after its resource limits
    import duckdb

    duckdb.connect(":memory:").close()
    _warm = True


def main() -> None:
    config = json.loads(sys.argv[1])
    for path in config["site"]:
        sys.path.append(path)
    protocol.apply_limits(config["limits"], bool(config["sandboxed"]))
    channel = protocol.Channel(_MAX_REQUEST)
    worker = Worker(config)
    handlers = {"load": worker.load, "query": worker.query, "memory": worker.memory}
    protocol.serve(channel, worker.ready, handlers)


if __name__ == "__main__":
    main()
