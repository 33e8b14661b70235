"""What the on-call SRE sees: the metrics tables and the call graph (the change log is
``changes.py``'s).

Every table's schema and row count is independent of the cause: metrics cover every service
and region at every bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from causaltrace import Panel, World
from causaltrace_domains.services.topology import CACHES, EDGES, KIND, QUEUE


def _long(
    panel: Panel, cells: np.ndarray, columns: dict[str, np.ndarray], names=("service", "region")
):
    """A long table over ``cells`` (indices into the panel) x every bucket."""
    n_t = panel.n_time
    times = panel.time.values.astype("datetime64[us]")
    frame = {"ts": np.tile(times, len(cells))}
    for dim, name in zip(("service", "region"), names):
        levels = list(panel.dimension(dim).levels)
        codes = np.repeat(panel.codes(dim)[cells], n_t)
        present = [lv for i, lv in enumerate(levels) if i in set(panel.codes(dim)[cells])]
        frame[name] = pd.Categorical(np.asarray(levels)[codes], categories=present)
    for col, values in columns.items():
        frame[col] = values[cells].reshape(-1)
    return pd.DataFrame(frame)


def _cells_of(panel: Panel, services: Sequence[str]) -> np.ndarray:
    names = panel.labels("service")
    return np.flatnonzero(np.isin(names, list(services)))


def service_metrics(panel: Panel, world: World) -> pd.DataFrame:
    cells = np.arange(panel.n_cells)
    return _long(
        panel,
        cells,
        {
            "requests": world["requests"],
            "errors": world["errors"],
            "latency_p50_ms": np.round(world["latency_p50_ms"], 1),
            "latency_p99_ms": np.round(world["latency_p99_ms"], 1),
        },
    )


def saturation(panel: Panel, world: World) -> pd.DataFrame:
    cells = np.arange(panel.n_cells)
    return _long(
        panel,
        cells,
        {
            "cpu_pct": np.round(world["cpu_pct"], 1),
            "cpu_steal_pct": np.round(world["cpu_steal_pct"], 1),
            "memory_pct": np.round(world["memory_pct"], 1),
            "connections_active": np.round(world["connections_active"], 1),
            "connections_pending": np.round(world["connections_pending"], 1),
        },
    )


def cache_metrics(panel: Panel, world: World) -> pd.DataFrame:
    cells = _cells_of(panel, CACHES)
    lookups, hits = world["requests"], world["hits"]
    frame = _long(
        panel,
        cells,
        {"lookups": lookups, "hits": hits, "misses": lookups - hits},
        names=("cache", "region"),
    )
    frame["hit_rate"] = np.round(frame["hits"] / np.maximum(frame["lookups"], 1), 4)
    return frame


def queue_metrics(panel: Panel, world: World) -> pd.DataFrame:
    cells = _cells_of(panel, (QUEUE,))
    return _long(
        panel,
        cells,
        {
            "published": world["requests"],
            "consumers": np.round(world["consumers"], 2),
            "depth": np.round(world["queue_depth"]).astype(np.int64),
        },
        names=("queue", "region"),
    )


def call_graph() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "caller": [e.caller for e in EDGES],
            "callee": [e.callee for e in EDGES],
            "callee_kind": [KIND[e.callee] for e in EDGES],
            "call": [e.kind for e in EDGES],
            "calls_per_request": [e.calls for e in EDGES],
            "only_on_miss_of": [e.on_miss_of or "" for e in EDGES],
        }
    )
