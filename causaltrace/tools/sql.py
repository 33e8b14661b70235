"""The ``sql`` tool: read-only DuckDB over one episode's visible tables.

Each episode gets its own in-memory DuckDB database (so no episode can see another's tables).
The Parquet files are loaded first; then the connection is closed to the outside world:

* ``enable_external_access = false``: no file reads or writes (``read_csv``, ``read_text``,
  ``glob``, ``COPY``, ``EXPORT``), no ``ATTACH`` of files, no extension install or load;
* ``python_enable_replacements = false``: SQL cannot name a Python variable of the *host*
  process (DuckDB's Python client would otherwise scan the caller's frames for DataFrames);
* extension autoload/autoinstall and community extensions off, no spilling to a temp directory,
  a memory limit and a thread count;
* ``lock_configuration = true`` last, so that no ``SET``/``RESET``/``PRAGMA x=y`` can undo any
  of the above.

:meth:`SqlTool.compact` then compresses the tables in memory (sessions do it in the background).

On top of that, statements are checked by DuckDB's own parser (``extract_statements``) and only
query-like statement types run, which makes the database read-only for the agent. Results are
capped in rows and characters (the agent is told when output was cut) and every error comes
back as text.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import duckdb

from causaltrace.tools.episode import EpisodeData

# Statement types the agent may run: reads and introspection only. SHOW/DESCRIBE/SUMMARIZE parse
# as SELECT; PRAGMA x=y and SET parse as SET and are refused (and locked anyway).
_ALLOWED = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL"})
_MAX_CELL_CHARS = 200


class SqlTool:
    """DuckDB over one episode's tables; :meth:`run` returns the text the agent sees."""

    def __init__(
        self,
        episode: EpisodeData,
        *,
        max_rows: int = 100,
        max_chars: int = 20_000,
        memory_limit: str = "1GB",
        threads: int = 1,
    ):
        self.max_rows = max_rows
        self.max_chars = max_chars
        self.tables = tuple(episode.tables)
        self._lock = threading.Lock()
        con = duckdb.connect(":memory:", config={"threads": threads, "memory_limit": memory_limit})
        try:
            for name, path in episode.tables.items():
                con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM read_parquet(?)', [str(path)])
            for statement in (
                "SET python_enable_replacements = false",
                "SET autoinstall_known_extensions = false",
                "SET autoload_known_extensions = false",
                "SET allow_community_extensions = false",
                "SET temp_directory = ''",
                "SET enable_external_access = false",
                "SET lock_configuration = true",
            ):
                con.execute(statement)
        except BaseException:
            con.close()
            raise
        self._con = con

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def compact(self) -> None:
        """Compress the loaded tables (a CHECKPOINT of the in-memory database).

        DuckDB keeps freshly loaded in-memory tables uncompressed; a checkpoint compresses them
        (about 9x less memory on typical episode tables, and faster scans), at a one-off cost of
        roughly 0.2 s per million rows. Sessions run it in the background after start.
        """
        with self._lock:
            self._con.execute("CHECKPOINT")

    def interrupt(self) -> None:
        """Stop the running query (thread-safe); :meth:`run` then returns an error text."""
        self._con.interrupt()

    def memory_bytes(self) -> int:
        """Bytes DuckDB holds for this episode (tables and buffers)."""
        with self._lock:
            row = self._con.execute(
                "SELECT sum(memory_usage_bytes) FROM duckdb_memory()"
            ).fetchone()
            self._con.abort()
        return int(row[0] or 0) if row else 0

    def run(self, query: str, timeout: float | None = None) -> str:
        """Run ``query`` and render its result (or the error) as capped text."""
        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, self._con.interrupt)
            timer.daemon = True
            timer.start()
        try:
            with self._lock:
                return self._run(query)
        finally:
            if timer is not None:
                timer.cancel()

    def _run(self, query: str) -> str:
        if not isinstance(query, str) or not query.strip():
            return "Error: the query is empty."
        con = self._con
        try:
            statements = con.extract_statements(query)
        except duckdb.Error as exc:
            return _error_text(exc)
        refused = [s.type.name for s in statements if s.type.name not in _ALLOWED]
        if refused == ["MULTI"]:
            return (
                "Error: PIVOT without an IN list creates a type, and the sql tool is read-only; "
                "name the pivoted values: PIVOT t ON col IN ('a', 'b') USING sum(x)."
            )
        if refused:
            return (
                f"Error: the sql tool is read-only; {', '.join(sorted(set(refused)))} statements "
                "are not allowed. Use SELECT (with WITH, JOIN, GROUP BY, window functions...), "
                "DESCRIBE, SHOW TABLES, SUMMARIZE, EXPLAIN or PRAGMA table_info('t')."
            )
        if not statements:
            return "Error: the query holds no statement."
        parts: list[str] = []
        try:
            for statement in statements:
                con.execute(statement)
                parts.append(self._render(con))
        except duckdb.Error as exc:
            parts.append(_error_text(exc))
        finally:
            with contextlib.suppress(duckdb.Error):
                con.abort()
        text = "\n\n".join(parts)
        if len(text) > self.max_chars:
            text = (
                text[: self.max_chars]
                + f"\n[output truncated: showing the first {self.max_chars} of {len(text)} "
                "characters; select fewer columns or rows]"
            )
        return text

    def _render(self, con: duckdb.DuckDBPyConnection) -> str:
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


def _error_text(exc: BaseException) -> str:
    message = str(exc).strip() or type(exc).__name__
    if isinstance(exc, duckdb.InterruptException):
        message = "the query was interrupted (time limit reached)"
    return f"Error: {message}"


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
