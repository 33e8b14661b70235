"""Reading the sql tool's text tables back into rows, keeping every value as printed so that a
scripted agent (a domain's teacher) can quote exactly what the analyst saw."""

from __future__ import annotations

import math


def parse_table(text: str) -> list[dict[str, str]]:
    """Rows of a ``render_table`` result (header, rule, rows, then a row count line).

    Returns [] for an error or an empty result. Values stay strings, as printed."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or not set(lines[1]) <= set("-+"):
        return []
    header = [h.strip() for h in lines[0].split(" | ")]
    rows = []
    for line in lines[2:]:
        if (line.startswith("(") and line.endswith(")")) or line.startswith("[output truncated"):
            break
        cells = [c.strip() for c in line.split(" | ")]
        cells += [""] * (len(header) - len(cells))
        rows.append(dict(zip(header, cells[: len(header)])))
    return rows


def num(value: str | None) -> float:
    """A printed number as a float (NULL, empty or unreadable: 0)."""
    if value is None or value in ("", "NULL"):
        return 0.0
    try:
        out = float(value)
    except ValueError:
        return 0.0
    return out if math.isfinite(out) else 0.0
