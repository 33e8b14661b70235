"""What the on-call SRE sees: metrics tables, the call graph, the change log; and the
background (harmless changes and latency blips in both worlds).

Every table's schema and row count is independent of the cause: metrics cover every service
and region at every bucket, the change log always has ``CHANGE_ROWS`` rows (a cause that is a
change replaces a decoy), and decoys use the same change types and fields as the causes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causaltrace import Background, InterventionDraw, Panel, Pulse, Scale, Slice, Window, World
from causaltrace_domains.services.topology import APP, CACHES, EDGES, KIND, QUEUE, REGIONS, SERVICES

CHANGE_ROWS = 14
AUTHORS = ("deploy-bot", "alice", "bogdan", "chen", "dana", "eitan", "farah", "gitops")
CONFIG_FIELDS = {  # field -> (old, new) choices of a harmless edit
    "feature.recommendations_widget": (("off", "on"), ("on", "off")),
    "http.client.timeout_ms": (("2000", "3000"), ("3000", "2500")),
    "cache.ttl_seconds": (("300", "600"), ("600", "900")),
    "log.level": (("info", "debug"), ("debug", "info")),
    "db.pool.max_connections": (),  # grown, never shrunk, by decoys: filled from the pool size
}
RECENT_SHARE = 0.35  # decoys in the last hours, where they line up with an alert
BLIP_PROBABILITY = 0.4


@dataclass(frozen=True)
class Change:
    """One change-log row before rendering (bucket index, minute in the bucket)."""

    bucket: int
    minute: int
    service: str
    region: str
    change_type: str  # deploy | config
    field: str
    old_value: str
    new_value: str
    author: str


def _version(rng: np.random.Generator) -> tuple[str, str]:
    minor, patch = int(rng.integers(10, 60)), int(rng.integers(0, 9))
    return (
        f"v1.{minor}.{patch}",
        f"v1.{minor}.{patch + 1}" if rng.random() < 0.6 else f"v1.{minor + 1}.0",
    )


def _decoy(rng: np.random.Generator, n_time: int, pools: np.ndarray) -> Change:
    if rng.random() < RECENT_SHARE:
        bucket = int(rng.integers(n_time - 16, n_time - 1))
    else:
        bucket = int(rng.integers(0, n_time - 16))
    region = REGIONS[int(rng.integers(len(REGIONS)))]
    author = AUTHORS[int(rng.integers(len(AUTHORS)))]
    minute = int(rng.integers(0, 15))
    if rng.random() < 0.55:
        service = APP[int(rng.integers(len(APP)))]
        old, new = _version(rng)
        return Change(bucket, minute, service, region, "deploy", "version", old, new, "deploy-bot")
    fields = list(CONFIG_FIELDS)
    field = fields[int(rng.integers(len(fields)))]
    service = APP[int(rng.integers(len(APP)))]
    if field == "db.pool.max_connections":
        old_pool = int(pools[SERVICES.index(service), REGIONS.index(region)])
        old, new = str(old_pool), str(old_pool + 4 * int(rng.integers(1, 5)))
    else:
        choices = CONFIG_FIELDS[field]
        old, new = choices[int(rng.integers(len(choices)))]
    return Change(bucket, minute, service, region, "config", field, old, new, author)


def sample_background(panel: Panel, pools: np.ndarray, rng: np.random.Generator) -> Background:
    """Harmless changes (decoys) and, sometimes, a short p99 blip on one app service in one
    region near the end (a GC storm, a slow node being drained): in both worlds."""
    n = panel.n_time
    decoys = tuple(_decoy(rng, n, pools) for _ in range(CHANGE_ROWS))
    interventions = ()
    if rng.random() < BLIP_PROBABILITY:
        service = APP[int(rng.integers(len(APP)))]
        region = REGIONS[int(rng.integers(len(REGIONS)))]
        onset = int(rng.integers(n - 8, n - 2))
        length = int(rng.integers(3, 7))
        factor = float(1.0 + rng.uniform(0.5, 1.5))
        interventions = (
            Scale(
                "tail_factor",
                where=Slice.of(service=service, region=region),
                window=Window(onset=onset, profile=Pulse(length)),
                factor=factor,
            ),
        )
    return Background(interventions, {"decoys": decoys})


def cause_changes(
    draw: InterventionDraw, panel: Panel, world: World, change: str | None, rng
) -> list[Change]:
    """The change the cause itself is (a deploy, a config edit), at its onset."""
    if change is None:
        return []
    sl = draw.slice.as_dict()
    service, region = sl["service"], sl["region"]
    minute = int(rng.integers(0, 10))
    author = AUTHORS[int(rng.integers(len(AUTHORS)))]
    if change == "deploy":
        old, new = _version(rng)
        return [
            Change(
                draw.window.onset,
                minute,
                service,
                region,
                "deploy",
                "version",
                old,
                new,
                "deploy-bot",
            )
        ]
    cell = int(np.flatnonzero(draw.slice.mask(panel))[0])
    t = draw.window.onset
    old = round(float(world["pool_limit"][cell, max(t - 1, 0)]))
    new = max(round(float(world["pool_limit"][cell, t])), 1)
    return [
        Change(
            t,
            minute,
            service,
            region,
            "config",
            "db.pool.max_connections",
            str(old),
            str(new),
            author,
        )
    ]


def change_log(panel: Panel, background: Background, cause: Sequence[Change]) -> pd.DataFrame:
    decoys = background.notes["decoys"][: max(CHANGE_ROWS - len(cause), 0)]
    rows = [*cause, *decoys]
    times = panel.time.values.astype("datetime64[m]")
    frame = pd.DataFrame(
        {
            "change_time": [
                (times[c.bucket] + np.timedelta64(c.minute, "m")).astype("datetime64[us]")
                for c in rows
            ],
            "service": [c.service for c in rows],
            "region": [c.region for c in rows],
            "change_type": [c.change_type for c in rows],
            "field": [c.field for c in rows],
            "old_value": [c.old_value for c in rows],
            "new_value": [c.new_value for c in rows],
            "author": [c.author for c in rows],
        }
    )
    frame["change_time"] = frame["change_time"].astype("datetime64[us]")
    return frame.sort_values("change_time", ascending=False, kind="stable").reset_index(drop=True)


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
        {"published": world["requests"], "depth": np.round(world["queue_depth"]).astype(np.int64)},
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
