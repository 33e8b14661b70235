"""Features of an episode's visible files, for the leakage and shortcut probes.

Every feature is computed from the episode directory alone (its tables, prompt and files),
never from a label or spec: a probe that predicts the cause from them measures what an agent
could learn from the same bytes.

- :func:`format_features`: what must carry no information about the cause (row counts, column
  sets, file sizes, dates, the prompt's dates, the episode id's number, row order, float
  formatting). A probe above chance on these is a leak.
- :func:`decoy_features`: the row count and kinds (value counts of low-cardinality text columns)
  of small tables such as a change history, where decoy rows sit beside the cause's own edit.
- :func:`summary_features`: relative change after vs before the alert onset of every numeric
  column of every dated table (summed over the table), and which column moved most: the
  at-a-glance statistics a shortcut would use.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

DATE_RE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
MAX_DECIMALS = 8
SAMPLE_ROWS = 2000  # float formatting and order statistics read at most this many rows


def _day(value: Any) -> float:
    """A date as days since 1970-01-01 (NaN if it is not one)."""
    try:
        return float(np.datetime64(pd.Timestamp(value), "D").astype(np.int64))
    except (ValueError, TypeError):
        return float("nan")


def _is_text(series: pd.Series) -> bool:
    """Categorical, object or string (pandas 3 stores text as ``str``) columns."""
    return isinstance(series.dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(series)


def _date_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if pd.api.types.is_datetime64_any_dtype(frame[c])]


def _decimals(values: np.ndarray) -> np.ndarray:
    """Per nonzero value, the fewest decimals that represent it (capped at MAX_DECIMALS).
    Zeros are left out: a column that is all zeros says something about the data, not about
    how it is formatted."""
    values = values[np.isfinite(values) & (values != 0)]
    if values.size == 0:
        return np.zeros(0)
    scaled = np.abs(values)[:, None] * (10.0 ** np.arange(MAX_DECIMALS + 1))[None, :]
    exact = np.isclose(scaled, np.round(scaled), rtol=0, atol=1e-6)
    exact[:, -1] = True
    return np.argmax(exact, axis=1).astype(np.float64)


def _first_positions(column: pd.Series) -> float:
    """Mean relative position of the first row of each level (row-order statistics)."""
    n = len(column)
    if n == 0:
        return float("nan")
    codes = pd.factorize(column, sort=True)[0]
    codes = codes[codes >= 0]
    if codes.size == 0:
        return float("nan")
    _, first = np.unique(codes, return_index=True)
    return float(np.mean(first) / n)


def _table_format(name: str, frame: pd.DataFrame) -> dict[str, float]:
    out: dict[str, float] = {
        f"{name}:rows": float(len(frame)),
        f"{name}:columns": float(frame.shape[1]),
        f"{name}:column_set": float(zlib.crc32("|".join(map(str, frame.columns)).encode()) % 997),
    }
    head = frame.iloc[:SAMPLE_ROWS]
    for col in _date_columns(frame):
        values = frame[col].dropna()
        if len(values):
            out[f"{name}:{col}:first_day"] = _day(values.min())
            out[f"{name}:{col}:last_day"] = _day(values.max())
    if frame.shape[1]:
        first = head.iloc[:, 0]
        try:
            out[f"{name}:sorted_first_column"] = float(first.is_monotonic_increasing)
            out[f"{name}:sorted_desc_first_column"] = float(first.is_monotonic_decreasing)
        except TypeError:
            pass
    for col in frame.columns:
        series = head[col]
        if _is_text(series):
            if series.nunique(dropna=True) <= 50:
                out[f"{name}:{col}:first_row_position"] = _first_positions(series)
        elif pd.api.types.is_float_dtype(series):
            dec = _decimals(series.to_numpy(dtype=np.float64))
            if dec.size:
                out[f"{name}:{col}:decimals_max"] = float(dec.max())
    return out


def format_features(
    directory: Path, tables: Mapping[str, pd.DataFrame], prompt: str, episode_id: str
) -> dict[str, float]:
    """Features that must not depend on the cause (see the module docstring)."""
    out: dict[str, float] = {}
    for path in sorted(Path(directory).iterdir()):
        if path.is_file():
            out[f"file:{path.name}:bytes"] = float(path.stat().st_size)
    out["files"] = float(sum(1 for p in Path(directory).iterdir() if p.is_file()))
    for name, frame in tables.items():
        out.update(_table_format(name, frame))
    days = [_day(d) for d in DATE_RE.findall(prompt)]
    days = [d for d in days if np.isfinite(d)]
    out["prompt:chars"] = float(len(prompt))
    out["prompt:lines"] = float(prompt.count("\n") + 1)
    if days:
        out["prompt:first_date"] = min(days)
        out["prompt:last_date"] = max(days)
        out["prompt:dates"] = float(len(days))
    digits = re.findall(r"\d+", episode_id)
    out["episode_number"] = float(digits[-1]) if digits else float("nan")
    return out


def decoy_features(
    tables: Mapping[str, pd.DataFrame], names: Sequence[str], max_levels: int = 30
) -> dict[str, float]:
    """Row count and value counts of the low-cardinality text columns of the named tables
    (for the ads domain, the change history: how many edits, of which types, by whom)."""
    out: dict[str, float] = {}
    for name in names:
        frame = tables.get(name)
        if frame is None:
            continue
        out[f"{name}:rows"] = float(len(frame))
        for col in frame.columns:
            series = frame[col]
            if not _is_text(series):
                continue
            counts = series.astype(str).value_counts()
            if len(counts) > max_levels:
                continue
            for value, count in counts.items():
                out[f"{name}:{col}={value}"] = float(count)
    return out


def summary_features(
    tables: Mapping[str, pd.DataFrame], alert_day: np.datetime64
) -> dict[str, float]:
    """Relative change (mean per day after the alert day over the mean per day before, minus 1)
    of every numeric column of every table with a date column, summed over the table; plus
    ``largest_move=<table.column>`` indicators (1 for the column that moved most)."""
    out: dict[str, float] = {}
    alert = np.datetime64(alert_day, "D")
    for name, frame in tables.items():
        dates = _date_columns(frame)
        numeric = [
            c
            for c in frame.columns
            if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
        ]
        if not dates or not numeric or frame.empty:
            continue
        day = frame[dates[0]].to_numpy().astype("datetime64[D]")
        daily = frame[numeric].groupby(day).sum(min_count=1)
        index = daily.index.to_numpy().astype("datetime64[D]")
        before, after = daily[index < alert], daily[index >= alert]
        if before.empty or after.empty:
            continue
        pre = before.mean().to_numpy(dtype=np.float64)
        post = after.mean().to_numpy(dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            change = np.where(np.abs(pre) > 1e-12, post / pre - 1.0, 0.0)
        for col, value in zip(numeric, change):
            out[f"change:{name}.{col}"] = float(value) if np.isfinite(value) else 0.0
    if out:
        largest = max(out, key=lambda k: abs(out[k]))
        out[f"largest_move={largest.removeprefix('change:')}"] = 1.0
    return out


SIZE_PREFIXES = ("file:", "files", "prompt:chars", "prompt:lines")


def split_sizes(row: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """A format-feature row split into (structure, sizes): file sizes and prompt length depend
    on the content by nature (compression, the alert's text), so they are probed apart."""
    sizes = {k: v for k, v in row.items() if k.startswith(SIZE_PREFIXES)}
    return {k: v for k, v in row.items() if k not in sizes}, sizes


def frame_of(rows: Sequence[Mapping[str, float]]) -> pd.DataFrame:
    """Feature dicts as a matrix (a feature missing from an episode is 0)."""
    frame = pd.DataFrame(list(rows)).astype(np.float64)
    frame = frame.reindex(columns=sorted(frame.columns))
    return frame.fillna(0.0) if len(frame.columns) else frame
