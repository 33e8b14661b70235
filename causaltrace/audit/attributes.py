"""The attributes of the edits in a record table, for the learned probe.

A twin edit can share the cause's edit's kind and still differ from it in what the page shows
about it: what it targets (an audience, not a geo or a device), its size, its timing against the
alert window and where it appears in the table. An outside review found a forest that read
such attributes (an audience-targeted edit, a recent targeting edit, an upward cost alert) named
TARGETING_EXPANSION at precision 0.85 on a split it had not seen, where no depth-2 rule of
:mod:`causaltrace.audit.rules` did. These features add to :mod:`causaltrace.audit.records`, per
group of rows, domain-free (from value shapes, never from column names or labels):

- **kinds**: a key column whose values read ``dim=level`` (a target such as
  ``audience=customer_match``) gets a column of its own holding the ``dim`` (``audience``; a
  value without ``=`` is its own kind): the kind of thing an edit targets, one feature whichever
  audience it is;
- **pairs**: rows grouped by two key columns at once (change type and target kind, field and
  target kind), for the key columns that are not entities (campaigns, services: the alert-match
  and breadth features read those) and have 2 to ``pair_levels`` values in the episode;
- per group (those of records.py, each kind and each pair), counts and sizes as records.py
  computes them (:func:`~causaltrace.audit.records.value_features`), and:

  - **timing**: days from the alert window's start to its first row and to its last row, the
    hour of day of its last row;
  - **order**: the position of its first row in the table (0: the top row) and that position as
    a share of the rows, the rank by time of its newest row (0: the table's newest row), and the
    most places one of its rows sits away from the table's time order (a row inserted out of
    order: where an edit first appears in the table told causes apart on an earlier ads split);
- the first alert line's words (a page lists the most severe alert first).

Missing features take records.py's "nothing there" (:func:`~causaltrace.audit.records.fill_value`):
a group that is absent has no first row, so its order features are far from the top.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import combinations

import numpy as np

from causaltrace.audit.alert_lines import alert_tokens
from causaltrace.audit.records import (
    EpisodeRecords,
    RecordTable,
    Roles,
    count_features,
    timing_features,
    value_features,
)

PAIR_LEVELS = 10  # a key column with more values in an episode is not paired
_PART = re.compile(r"\s*&\s*")


def kind_of(value: str) -> str:
    """``audience=customer_match`` -> ``audience``; ``device=mobile & geo=uk`` -> ``device&geo``;
    a value without ``=`` is its own kind."""
    if "=" not in value:
        return value
    return "&".join(part.split("=", 1)[0] for part in _PART.split(value) if part)


def with_kinds(table: RecordTable) -> tuple[RecordTable, dict[str, str]]:
    """The table with a kind column beside each key column some of whose values read
    ``dim=level`` (in every such episode, though one with a single level per kind has nothing
    new in it: the feature must mean the same in every episode); and each kind column's source."""
    text, sources = dict(table.text), {}
    for col in table.roles.keys:
        if not any("=" in v for v in table.text[col].tolist()):
            continue
        text[f"{col} kind"] = np.array([kind_of(v) for v in table.text[col].tolist()], dtype=object)
        sources[f"{col} kind"] = col
    roles = table.roles
    widened = Roles(
        roles.time, (*roles.categorical, *sources), roles.values, roles.numeric, roles.entities
    )
    return _regrouped(table, text, widened, table.groups), sources


def _regrouped(table: RecordTable, text, roles: Roles, groups) -> RecordTable:
    return RecordTable(
        table.name,
        table.n,
        text,
        table.numbers,
        table.times,
        roles,
        tuple(groups),
        table.changes,
        table.settings,
    )


def attribute_groups(
    table: RecordTable, sources: dict[str, str], pair_levels: int = PAIR_LEVELS
) -> RecordTable:
    """The table's groups, then one per kind, then one per pair of values of two pairable key
    columns (module docstring; a kind is not paired with its own column)."""
    groups = list(table.groups)
    for col in sources:
        for level in sorted(set(table.text[col].tolist())):
            groups.append((f"{col}={level}", table.text[col] == level))
    pairable = [
        c
        for c in table.roles.keys
        if c not in table.roles.entities and 2 <= len(set(table.text[c].tolist())) <= pair_levels
    ]
    for a, b in combinations(pairable, 2):
        if sources.get(a) == b or sources.get(b) == a:
            continue
        for x, y in sorted(set(zip(table.text[a].tolist(), table.text[b].tolist()))):
            mask = (table.text[a] == x) & (table.text[b] == y)
            groups.append((f"{a}={x} & {b}={y}", mask))
    return _regrouped(table, table.text, table.roles, groups)


def time_rank(times: np.ndarray) -> np.ndarray:
    """Each row's place in the table's own time order: newest first when most neighbouring rows
    run from newer to older, else oldest first (ties keep the table's order)."""
    stamps = times.astype("datetime64[m]").astype(np.int64)
    newest_first = (np.diff(stamps) <= 0).sum() >= (np.diff(stamps) >= 0).sum()
    order = np.argsort(-stamps if newest_first else stamps, kind="stable")
    rank = np.empty(len(stamps), dtype=np.int64)
    rank[order] = np.arange(len(stamps))
    return rank


def order_features(table: RecordTable, episode: EpisodeRecords) -> dict[str, float]:
    """Per group: timing (days from the alert start to its first and last row, hour of its last
    row) and order (first position and its share, newest rank by time, most places out of time
    order); module docstring."""
    if not table.n:
        return {}
    out: dict[str, float] = {}
    position = np.arange(table.n)
    valid = table.times is not None and not np.isnat(table.times).any()
    if valid:
        stamps = table.times.astype("datetime64[m]")
        by_time = np.argsort(-stamps.astype(np.int64), kind="stable")
        newest = np.empty(table.n, dtype=np.int64)
        newest[by_time] = position
        displaced = np.abs(position - time_rank(stamps))
    day = np.timedelta64(1, "D")
    for group, mask in table.groups:
        if not mask.any():
            continue
        scope = f"{table.name}[{group}]"
        first = int(position[mask].min())
        out[f"{scope}: first position"] = float(first)
        out[f"{scope}: first position share"] = first / max(table.n - 1, 1)
        if not valid:
            continue
        mine = stamps[mask]
        out[f"{scope}: newest rank by time"] = float(newest[mask].min())
        out[f"{scope}: most places out of time order"] = float(displaced[mask].max())
        last = mine.max()
        out[f"{scope}: hour of last row"] = float(
            (last - last.astype("datetime64[D]")) / np.timedelta64(1, "h")
        )
        if episode.window.start is not None:
            start = episode.window.start
            out[f"{scope}: days from alert start to first row"] = float((mine.min() - start) / day)
    return out


def attribute_features(
    table: RecordTable, episode: EpisodeRecords, pair_levels: int = PAIR_LEVELS
) -> dict[str, float]:
    """Every family of the module docstring for one record table (records.py's counts, sizes and
    timing on the kind and pair groups, then the order features on every group)."""
    widened, sources = with_kinds(table)
    grouped = attribute_groups(widened, sources, pair_levels)
    out = count_features(widened)
    out.update(value_features(grouped))
    out.update(timing_features(grouped, episode.window, episode.end))
    out.update(order_features(grouped, episode))
    return out


def first_alert_features(episode: EpisodeRecords) -> dict[str, float]:
    """The words of the first alert line (the most severe alert of a page)."""
    if not episode.lines:
        return {}
    words = alert_tokens([episode.lines[0]])
    return {f"alert 1: word {w!r}": float(c) for w, c in Counter(words).items()}
