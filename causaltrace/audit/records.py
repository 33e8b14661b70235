"""Features of an episode's record tables and alert line(s), for the per-cause rule probe.

Record tables hold events and settings, not metrics (for ads the change history, the campaigns
and the ads with their policy status; for services the change log of deploys and config
edits). They are legitimate evidence, but a rule on them alone, with no metric read, must not
decide a cause: an outside review found that "a bid edit of more than 25%" or "an enabled ad
whose policy status is disapproved" named four ads causes with precision 1.00. These features
are what such rules are made of, computed domain-free from dtypes and value shapes (never from
column names, never from labels), each family for a reason:

- **counts** of rows per categorical value and per pair of values (``status=enabled &
  policy_status=disapproved``): whether an edit or a setting of some kind exists at all;
- **values**: numbers parsed from text value columns (``4,520``, ``+150%``, ``12 keywords``),
  old against new, per level of every categorical column (so per field, per change type):
  the smallest and largest ratio new/old, the largest relative change, the smallest and largest
  signed change; how large an edit is ("a budget cut to under 0.6 of the old"); and the
  setting itself, per group: the smallest and largest new value of non-percentage edits and of
  each numeric column ("brand_search's new budget under 5,000": a level that decides whether
  an edit binds once a model has memorized how much the campaign usually spends);
- **breadth**: the most rows, and the most distinct values of each other categorical column
  (campaigns, services), that share a level, the same new value or the same ratio within one
  hour; an edit made across the account at once ("the same edit on >= 2 campaigns");
- **timing**: days from a level's last row to the end of the data (the alert window's end) and
  from the alert window's start to it, and its rows inside the window; an edit right before the
  alert;
- **alert match**: rows whose values (a campaign, a target, a service) appear in the alert line,
  per level; the edit is on the alerted scope;
- **alert tokens**: the words of the alert line(s): its KPI, scope and direction.

Column roles: a *time* column has a datetime dtype; a *categorical* column is text with at most
``max_levels`` distinct values in the episode; a *value* column is text in which some value
parses as a number. Value columns are paired in column order, the first of a pair read as the
old value and the second as the new one (a change log's convention). Percentages are read as
adjustments (``+20%`` is a multiplier of 1.2), so ``+0%`` to ``+30%`` is a ratio of 1.3.

Missing features (an episode without edits of some kind) take the value of "nothing there":
0 for counts and changes, 1 for ratios, far away for days (:func:`fill_value`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from causaltrace.audit.alert_lines import AlertWindow, alert_lines, alert_tokens, alert_window

MAX_LEVELS = 30  # a text column with more distinct values in an episode is not categorical
HOUR = np.timedelta64(60, "m")
SAME_RATIO = 0.02  # two ratios within 2% of each other are "the same relative change"
FAR_DAYS = 1000.0  # the days of a level with no row: far from the alert
FAR_ROWS = 1000.0  # the position of a level with no row: far from the table's top

_NUMBER = re.compile(
    r"^\s*(?P<sign>[+-]?)\s*[$\u20ac\u00a3]?\s*(?P<num>\d[\d,]*(?:\.\d+)?|\.\d+)"
    r"\s*(?P<unit>%|[A-Za-z_]+)?\s*$"
)

# Per statistic, the value of "nothing there" (a feature's name ends with ": <statistic>").
STAT_FILL = {
    "min new/old": 1.0,
    "max new/old": 1.0,
    "days from last row to data end": FAR_DAYS,
    "days from alert start to last row": -FAR_DAYS,
    # the attributes of :mod:`causaltrace.audit.attributes` (the learned probe's)
    "days from alert start to first row": -FAR_DAYS,
    "hour of last row": -1.0,
    "first position": FAR_ROWS,
    "first position share": 1.0,
    "newest rank by time": FAR_ROWS,
}


def fill_value(feature: str) -> float:
    """What a feature is when an episode does not have it (module docstring)."""
    return STAT_FILL.get(feature.rsplit(": ", 1)[-1], 0.0)


@dataclass(frozen=True)
class Parsed:
    """A number read from a value cell: its value and unit (``%``, a word, or empty)."""

    value: float
    unit: str


def parse_number(text: object) -> Parsed | None:
    """``"4,520"`` -> 4520, ``"+150%"`` -> 150 %, ``"12 keywords"`` -> 12 keywords; else None."""
    if not isinstance(text, str):
        return None
    found = _NUMBER.match(text)
    if not found:
        return None
    value = float(found.group("num").replace(",", ""))
    unit = (found.group("unit") or "").lower()
    return Parsed(-value if found.group("sign") == "-" else value, unit)


def change_of(old: Parsed | None, new: Parsed | None) -> tuple[float, float] | None:
    """(ratio new/old, signed change new - old) of two parsed values of the same unit."""
    if old is None or new is None or old.unit != new.unit:
        return None
    if old.unit == "%":  # an adjustment: +20% multiplies by 1.2
        before, after = 1 + old.value / 100, 1 + new.value / 100
    else:
        before, after = old.value, new.value
    ratio = after / before if before > 0 and after >= 0 else np.nan
    return float(ratio), new.value - old.value


@dataclass(frozen=True)
class Roles:
    """The columns of a record table by role (module docstring)."""

    time: str | None
    categorical: tuple[str, ...]
    values: tuple[tuple[str, str], ...]  # (old, new) pairs
    numeric: tuple[str, ...]
    entities: tuple[str, ...] = ()  # key columns whose values another table has (join keys)

    @property
    def keys(self) -> tuple[str, ...]:
        """The categorical columns rows are grouped by: all but the value columns (whose
        levels are read as counts only)."""
        paired = {c for pair in self.values for c in pair}
        return tuple(c for c in self.categorical if c not in paired)


@dataclass(frozen=True)
class RecordTable:
    """A record table as plain arrays (text as ``str``, ``""`` where missing), its roles, its
    row groups (all rows, then each level of each key column) and each value pair's changes."""

    name: str
    n: int
    text: Mapping[str, np.ndarray]
    numbers: Mapping[str, np.ndarray]
    times: np.ndarray | None  # datetime64[m]
    roles: Roles
    groups: tuple[tuple[str, np.ndarray], ...]
    changes: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray]]  # (ratio, delta) per row
    # Per value pair, the new value of each row whose new value is a level, not a percentage
    # adjustment (NaN elsewhere): a budget, a count of keywords.
    settings: Mapping[tuple[str, str], np.ndarray] = field(default_factory=dict)


def _is_text(series: pd.Series) -> bool:
    return isinstance(series.dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(series)


def _strings(series: pd.Series) -> np.ndarray:
    return np.array(["" if pd.isna(v) else str(v) for v in series.tolist()], dtype=object)


def _is_key_of(values: np.ndarray, elsewhere: Sequence[frozenset[str]]) -> bool:
    """At least half of the column's values are the values of a column of another table."""
    distinct = {v for v in values.tolist() if v}
    return bool(distinct) and any(2 * len(distinct & other) >= len(distinct) for other in elsewhere)


def read_record_table(
    name: str,
    frame: pd.DataFrame,
    max_levels: int = MAX_LEVELS,
    elsewhere: Sequence[frozenset[str]] = (),
) -> RecordTable:
    """Roles from dtypes and value shapes only, never from column names: a datetime column is
    the time; a bool column, or a text one with at most ``max_levels`` values, is categorical;
    a text column in which some value parses as a number is a value column (paired in column
    order: old, new); other numbers are numeric. ``elsewhere``: the value sets of the text
    columns of the episode's other tables; a key column at least half of whose values one of
    them holds is an *entity* (a campaign, a service), which the breadth features count."""
    time = next((c for c in frame.columns if pd.api.types.is_datetime64_any_dtype(frame[c])), None)
    text: dict[str, np.ndarray] = {}
    numbers: dict[str, np.ndarray] = {}
    categorical, values = [], []
    for col in frame.columns:
        series = frame[col]
        if pd.api.types.is_bool_dtype(series) or _is_text(series):
            text[col] = _strings(series)
            if len(set(text[col].tolist())) <= max_levels:
                categorical.append(col)
            if _is_text(series) and any(parse_number(v) for v in set(text[col].tolist())):
                values.append(col)
        elif pd.api.types.is_numeric_dtype(series):
            numbers[col] = pd.to_numeric(series, errors="coerce").to_numpy(np.float64)
    pairs = tuple(zip(values[0::2], values[1::2]))
    paired = {c for pair in pairs for c in pair}
    entities = tuple(c for c in categorical if c not in paired and _is_key_of(text[c], elsewhere))
    roles = Roles(time, tuple(categorical), pairs, tuple(numbers), entities)
    groups = [("*", np.ones(len(frame), dtype=bool))]
    for col in roles.keys:
        for level in sorted(set(text[col].tolist())):
            groups.append((f"{col}={level}", text[col] == level))
    changes, settings = {}, {}
    for old, new in pairs:
        parsed = [(parse_number(o), parse_number(n)) for o, n in zip(text[old], text[new])]
        rows = [change_of(o, n) for o, n in parsed]
        ratio = np.array([r[0] if r else np.nan for r in rows], dtype=np.float64)
        delta = np.array([r[1] if r else np.nan for r in rows], dtype=np.float64)
        changes[(old, new)] = (ratio, delta)
        settings[(old, new)] = np.array(
            [n.value if n is not None and n.unit != "%" else np.nan for _, n in parsed],
            dtype=np.float64,
        )
    times = frame[time].to_numpy().astype("datetime64[m]") if time is not None else None
    return RecordTable(
        name, len(frame), text, numbers, times, roles, tuple(groups), changes, settings
    )


def count_features(table: RecordTable) -> dict[str, float]:
    """Rows per categorical value, and per pair of values of two key columns; the least, most
    and total of each numeric column (a setting such as a budget)."""
    name, roles = table.name, table.roles
    out = {f"{name}: rows": float(table.n)}
    for a in roles.categorical:
        for level, count in Counter(table.text[a].tolist()).items():
            out[f"{name}: rows with {a}={level}"] = float(count)
    for i, a in enumerate(roles.keys):
        for b in roles.keys[i + 1 :]:
            for (x, y), count in Counter(zip(table.text[a], table.text[b])).items():
                out[f"{name}: rows with {a}={x} & {b}={y}"] = float(count)
    for col, values in table.numbers.items():
        values = values[np.isfinite(values)]
        if values.size:
            out[f"{name}: min {col}"] = float(values.min())
            out[f"{name}: max {col}"] = float(values.max())
            out[f"{name}: sum {col}"] = float(values.sum())
    return out


def _pair_label(table: RecordTable, pair: tuple[str, str]) -> str:
    return "" if len(table.roles.values) == 1 else f" ({pair[0]}->{pair[1]})"


def value_features(table: RecordTable) -> dict[str, float]:
    """Per row group: min and max ratio new/old, max |relative change|, min and max change,
    min and max new setting (non-percentage edits) and of each numeric column."""
    out: dict[str, float] = {}
    for group, mask in table.groups[1:]:  # the whole table's numbers are count_features'
        for col, values in table.numbers.items():
            v = values[mask]
            v = v[np.isfinite(v)]
            if v.size:
                out[f"{table.name}[{group}]: min {col}"] = float(v.min())
                out[f"{table.name}[{group}]: max {col}"] = float(v.max())
        for pair, levels in table.settings.items():
            v = levels[mask]
            v = v[np.isfinite(v)]
            if v.size:
                scope = f"{table.name}[{group}]{_pair_label(table, pair)}"
                out[f"{scope}: min new setting"] = float(v.min())
                out[f"{scope}: max new setting"] = float(v.max())
    for pair, (ratio, delta) in table.changes.items():
        for group, mask in table.groups:
            scope = f"{table.name}[{group}]{_pair_label(table, pair)}"
            r, d = ratio[mask], delta[mask]
            r, d = r[np.isfinite(r)], d[np.isfinite(d)]
            if r.size:
                out[f"{scope}: min new/old"] = float(r.min())
                out[f"{scope}: max new/old"] = float(r.max())
                out[f"{scope}: max |relative change|"] = float(np.abs(r - 1).max())
            if d.size:
                out[f"{scope}: min change (new-old)"] = float(d.min())
                out[f"{scope}: max change (new-old)"] = float(d.max())
    return out


def _widest(times: np.ndarray, keys: np.ndarray, entities: Sequence[np.ndarray]) -> list[float]:
    """Over every row i with a key: among rows j in the hour from row i's time with the same
    key, the number of rows and of distinct values of each entity column; the maxima."""
    best = [0.0] * (1 + len(entities))
    for i in range(len(times)):
        if keys[i] is None:
            continue
        same = (times >= times[i]) & (times <= times[i] + HOUR) & (keys == keys[i])
        best[0] = max(best[0], float(same.sum()))
        for e, column in enumerate(entities, start=1):
            best[e] = max(best[e], float(len(set(column[same].tolist()))))
    return best


def _ratio_keys(ratios: np.ndarray) -> np.ndarray:
    """Changed ratios within ``SAME_RATIO`` of each other (chained, ascending) share a key."""
    keys = np.full(len(ratios), None, dtype=object)
    anchor, key = np.nan, -1
    for i in np.argsort(ratios):
        r = ratios[i]
        if not np.isfinite(r) or abs(r - 1) < 1e-9:
            continue
        if not np.isfinite(anchor) or r > anchor * (1 + SAME_RATIO):
            anchor, key = r, key + 1
        keys[i] = key
    return keys


def breadth_features(table: RecordTable) -> dict[str, float]:
    """Per row group: the most rows, and distinct values of each entity column, with the same
    new value, or the same ratio new/old, or the same value of another key column and the same
    new value (the same edit: same target, same field), within one hour."""
    if table.times is None or not table.changes or not table.n:
        return {}
    out: dict[str, float] = {}
    for (old, new), (ratio, _) in table.changes.items():
        new_keys = np.array([v or None for v in table.text[new]], dtype=object)
        by = [("new value", new_keys), ("new/old", _ratio_keys(ratio))]
        for col in table.roles.keys:
            if col not in table.roles.entities:
                same = [f"{a}\x1f{b}" if b else None for a, b in zip(table.text[col], new_keys)]
                by.append((f"{col} and new value", np.array(same, dtype=object)))
        for group, mask in table.groups:
            column = group.split("=", 1)[0]
            others = [c for c in table.roles.entities if c != column]
            entities = [table.text[c][mask] for c in others]
            scope = f"{table.name}[{group}]{_pair_label(table, (old, new))}"
            for what, keys in by:
                if what.startswith(f"{column} and "):
                    continue  # the group's own column: the same as "new value"
                best = _widest(table.times[mask], keys[mask], entities)
                out[f"{scope}: most rows with the same {what} within 1h"] = best[0]
                for col, value in zip(others, best[1:]):
                    out[f"{scope}: most distinct {col} with the same {what} within 1h"] = value
    return out


def timing_features(
    table: RecordTable, window: AlertWindow, data_end: np.datetime64 | None
) -> dict[str, float]:
    """Per row group: days from its last row to the data's end, from the alert window's start
    to its last row (positive: inside the window), and its rows inside the window."""
    if table.times is None or not table.n:
        return {}
    out: dict[str, float] = {}
    day = np.timedelta64(1, "D")
    for group, mask in table.groups:
        mine = table.times[mask]
        mine = mine[~np.isnat(mine)]
        if not mine.size:
            continue
        last, scope = mine.max(), f"{table.name}[{group}]"
        if data_end is not None:
            out[f"{scope}: days from last row to data end"] = float((data_end - last) / day)
        if window.start is not None:
            out[f"{scope}: days from alert start to last row"] = float((last - window.start) / day)
            out[f"{scope}: rows in the alert window"] = float((mine >= window.start).sum())
    return out


def _in_alert(value: str, words: set[str]) -> bool:
    """A cell names something the alert names: the value, or a ``dim=level`` part's level."""
    value = value.lower()
    if value in words:
        return True
    parts = [p.split("=", 1)[-1] for p in re.split(r"[&,;]\s*", value) if "=" in p]
    return any(p in words for p in parts)


def alert_match_features(table: RecordTable, words: set[str]) -> dict[str, float]:
    """Rows whose value in each key column the alert names; and per row group, the rows that
    name something the alert names in another key column."""
    if not words or not table.n:
        return {}
    hits = {
        c: np.array([_in_alert(v, words) for v in table.text[c]], dtype=bool)
        for c in table.roles.keys
    }
    out = {f"{table.name}: rows whose {c} the alert names": float(h.sum()) for c, h in hits.items()}
    for group, mask in table.groups[1:]:
        column = group.split("=", 1)[0]
        named = np.zeros(table.n, dtype=bool)
        for col, hit in hits.items():
            if col != column:
                named |= hit
        out[f"{table.name}[{group}]: rows naming what the alert names"] = float(
            (named & mask).sum()
        )
    return out


def _text_columns(
    tables: Mapping[str, pd.DataFrame], max_levels: int = MAX_LEVELS
) -> dict[str, list[frozenset[str]]]:
    """Per table, the distinct values of each of its low-cardinality text columns (values only,
    never a metric: they tell a join key such as a campaign's name)."""
    out: dict[str, list[frozenset[str]]] = {}
    for name, frame in tables.items():
        out[name] = []
        for col in frame.columns:
            if _is_text(frame[col]):
                levels = frame[col].unique()
                if len(levels) <= 10 * max_levels:
                    out[name].append(frozenset(str(v) for v in levels if not pd.isna(v)))
    return out


def _data_end(tables: Mapping[str, pd.DataFrame]) -> np.datetime64 | None:
    """The latest time stamp of any table (dates only: a day's rows end at the next midnight)."""
    ends = []
    for frame in tables.values():
        for col in frame.columns:
            if pd.api.types.is_datetime64_any_dtype(frame[col]) and frame[col].notna().any():
                stamps = frame[col].dropna().to_numpy().astype("datetime64[m]")
                last = stamps.max()
                whole_days = bool((stamps == stamps.astype("datetime64[D]")).all())
                ends.append(last + np.timedelta64(1, "D") if whole_days else last)
    return max(ends) if ends else None


@dataclass(frozen=True)
class EpisodeRecords:
    """An episode's record tables as read (those of the named tables present), its alert lines
    and their words, the alert window and the data's end: what every feature family reads."""

    lines: tuple[str, ...]
    words: tuple[str, ...]
    window: AlertWindow
    end: np.datetime64 | None
    tables: Mapping[str, RecordTable]


def read_records(
    tables: Mapping[str, pd.DataFrame],
    prompt: str,
    record_tables: Sequence[str],
    max_levels: int = MAX_LEVELS,
) -> EpisodeRecords:
    """The named record tables (those present) with their roles, and the prompt's alert lines.
    Other tables are read for their text columns' value sets (which record columns are join
    keys) and, when the alert names no window, their last time stamp (the data's end); never
    for a metric."""
    lines = alert_lines(prompt)
    window = alert_window(lines)
    end = window.end if window.end is not None else _data_end(tables)
    present = [name for name in record_tables if name in tables]
    columns = _text_columns(tables, max_levels) if present else {}
    read = {}
    for name in present:
        elsewhere = [s for other, sets in columns.items() if other != name for s in sets]
        read[name] = read_record_table(name, tables[name], max_levels, elsewhere)
    return EpisodeRecords(tuple(lines), tuple(alert_tokens(lines)), window, end, read)


def alert_features(episode: EpisodeRecords) -> dict[str, float]:
    """The alert lines' count and words (KPI, scope, direction)."""
    out: dict[str, float] = {"alert: lines": float(len(episode.lines))}
    for word, count in Counter(episode.words).items():
        out[f"alert: word {word!r}"] = float(count)
    return out


def table_features(table: RecordTable, episode: EpisodeRecords) -> dict[str, float]:
    """A record table's counts, values, breadth and timing (not what the alert names)."""
    out = count_features(table)
    out.update(value_features(table))
    out.update(breadth_features(table))
    out.update(timing_features(table, episode.window, episode.end))
    return out


def record_features(
    tables: Mapping[str, pd.DataFrame],
    prompt: str,
    record_tables: Sequence[str],
    max_levels: int = MAX_LEVELS,
) -> dict[str, float]:
    """Every family of the module docstring for one episode: the named record tables (those
    present, :func:`read_records`) and the prompt's alert line(s)."""
    episode = read_records(tables, prompt, record_tables, max_levels)
    out = alert_features(episode)
    for table in episode.tables.values():
        out.update(table_features(table, episode))
        out.update(alert_match_features(table, set(episode.words)))
    return out


def record_frame(rows: Sequence[Mapping[str, float]]) -> pd.DataFrame:
    """Feature dicts as a matrix; a feature an episode lacks takes :func:`fill_value`."""
    frame = pd.DataFrame(list(rows)).astype(np.float64)
    frame = frame.reindex(columns=sorted(frame.columns))
    return frame.fillna({c: fill_value(c) for c in frame.columns}) if len(frame.columns) else frame
