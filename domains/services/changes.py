"""The change log: deploys and config edits, the causes' own and harmless ones, as one table.

A change is first a :class:`ChangeSlot` (when, where, what kind, and the uniform draws its
values will use), then a rendered :class:`Change` row. Slots come from three places:

- scattered over the panel by the background (:func:`scattered_slots`, before simulation);
- in every alerted application service and region, at the times a cause's change would be
  (:func:`alerted_slots`, at render time, from the page the factual tables raise), and in
  random other application cells up to a fixed number of cells (:func:`decoy_cells`): so "a
  deploy in the alerted service just before the alert" happens whatever the cause, and how many
  such changes there are does not follow the page;
- the cause's own change (:func:`cause_slots`), which takes the place of one alerted slot of
  its kind in its cell, so the number of changes there does not depend on the cause.

:func:`resolve` turns slots into rows against the factual world, cell by cell in time order:
versions follow each other, and a connection pool's old value is the one the previous change
left. A harmless pool resize is chosen above the cell's in-flight requests (rate x mean latency,
Little's law) for as long as it stands (up to the next pool change the cause makes there, which
stays a cut): in-flight requests below the pool wait for nothing, so applying the resize to the
SCM would change no observed value (tests/domains/test_services_decoys.py applies it and compares). A
resize that cannot be harmless (the pool already binds there) becomes another config edit. So
whether a change is the cause shows only in the metrics: errors or pending connections moving
from its time on, in its service and region.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from causaltrace import InterventionDraw, Panel, World
from causaltrace_domains.services.topology import APP, REGIONS, SERVICES

AUTHORS = ("alice", "bogdan", "chen", "dana", "eitan", "farah", "gitops")
DEPLOYER = "deploy-bot"
POOL_FIELD = "db.pool.max_connections"
OTHER_FIELDS = {  # field -> (old, new) choices of an edit nothing in the model reads
    "feature.recommendations_widget": (("off", "on"), ("on", "off")),
    "http.client.timeout_ms": (("2000", "3000"), ("3000", "2500"), ("2500", "2000")),
    "cache.ttl_seconds": (("300", "600"), ("600", "900"), ("900", "300")),
    "log.level": (("info", "debug"), ("debug", "info")),
}
KINDS = ("deploy", "pool", "config")
MINUTES = 10  # a change lands in the first minutes of its bucket (the cause's and decoys' alike)
SAFE_MARGIN = (1.1, 1.8)  # a harmless pool cut stays this many times above the in-flight peak
CUT_MARGIN = 1.25  # a pool edit before the cause's cut stays this far above the cut


@dataclass(frozen=True)
class ChangeSlot:
    """A change before rendering: bucket, minute, cell, kind (deploy | pool | config), author,
    and ``u``, uniform draws its values use. ``cause`` marks a cause's own change."""

    bucket: int
    minute: int
    service: str
    region: str
    kind: str
    author: str
    u: tuple[float, float, float]
    cause: bool = False


@dataclass(frozen=True)
class Change:
    """One change-log row (bucket index, minute in the bucket)."""

    bucket: int
    minute: int
    service: str
    region: str
    change_type: str  # deploy | config
    field: str
    old_value: str
    new_value: str
    author: str


def _slot(rng: np.random.Generator, bucket: int, service: str, region: str, kind: str):
    author = DEPLOYER if kind == "deploy" else AUTHORS[int(rng.integers(len(AUTHORS)))]
    u = tuple(float(x) for x in rng.random(3))
    return ChangeSlot(bucket, int(rng.integers(0, MINUTES)), service, region, kind, author, u)


def scattered_slots(
    n_time: int, count: int, recent_share: float, rng: np.random.Generator
) -> tuple[ChangeSlot, ...]:
    """``count`` harmless changes on random application cells: ``recent_share`` of them in
    the last four hours (where they line up with an alert), the rest earlier."""
    out = []
    for _ in range(count):
        recent = rng.random() < recent_share
        bucket = int(
            rng.integers(n_time - 16, n_time - 1) if recent else rng.integers(0, n_time - 16)
        )
        service = APP[int(rng.integers(len(APP)))]
        region = REGIONS[int(rng.integers(len(REGIONS)))]
        kind = KINDS[int(rng.choice(3, p=(0.5, 0.25, 0.25)))]
        out.append(_slot(rng, bucket, service, region, kind))
    return tuple(out)


def decoy_cells(
    alerted: Sequence[tuple[str, str]], count: int, rng: np.random.Generator
) -> list[tuple[str, str]]:
    """The cells that get harmless changes at the causes' times: the alerted application cells
    (in page order), then random other application cells up to ``count`` (so the number of
    changes does not follow the page, whose size follows the cause)."""
    chosen = list(dict.fromkeys(c for c in alerted if c[0] in APP))[:count]
    others = [(s, r) for s in APP for r in REGIONS if (s, r) not in chosen]
    for i in rng.permutation(len(others))[: max(count - len(chosen), 0)]:
        chosen.append(others[int(i)])
    return chosen


def alerted_slots(
    cells: Iterable[tuple[str, str]],
    onsets: tuple[int, int],
    means: Mapping[str, float],
    taken: Mapping[tuple[str, str, str], int],
    rng: np.random.Generator,
) -> list[ChangeSlot]:
    """Harmless changes in each alerted application cell: per kind a Poisson number with mean
    ``means[kind]``, less the ``taken[(service, region, kind)]`` changes causes make there,
    at buckets uniform over ``onsets`` (inclusive), the causes' onset range."""
    out = []
    for service, region in cells:
        if service not in APP:
            continue
        for kind in KINDS:
            count = int(rng.poisson(means[kind])) - taken.get((service, region, kind), 0)
            for _ in range(max(count, 0)):
                bucket = int(rng.integers(onsets[0], onsets[1] + 1))
                out.append(_slot(rng, bucket, service, region, kind))
    return out


def cause_slots(
    draw: InterventionDraw, change: str | None, rng: np.random.Generator
) -> list[ChangeSlot]:
    """The change a cause is (a deploy, a pool cut), at its onset in its cell."""
    if change is None:
        return []
    where = draw.slice.as_dict()
    kind = "deploy" if change == "deploy" else "pool"
    slot = _slot(rng, draw.window.onset, where["service"], where["region"], kind)
    return [replace(slot, cause=True)]


def _version(minor: int, patch: int) -> str:
    return f"v1.{minor}.{patch}"


def _in_flight(world: World) -> np.ndarray:
    """Requests in flight per cell and bucket (Little's law), the demand on a pool."""
    return world["request_rate"] * world["latency_mean"] / 1000.0


def resolve(slots: Sequence[ChangeSlot], panel: Panel, world: World) -> list[Change]:
    """Rows for ``slots`` (see the module docstring), in time order."""
    n = panel.n_time
    in_flight = _in_flight(world)
    pools = world["pool_limit"]
    order = sorted(range(len(slots)), key=lambda i: (slots[i].bucket, slots[i].minute, i))
    versions: dict[tuple[str, str], tuple[int, int]] = {}
    shown_pool: dict[tuple[str, str], int] = {}
    cuts = {  # the cause's pool cut per cell: (bucket, new pool)
        (s.service, s.region): s.bucket for s in slots if s.cause and s.kind == "pool"
    }
    rows = []
    for i in order:
        s = slots[i]
        key = (s.service, s.region)
        cell = SERVICES.index(s.service) * len(REGIONS) + REGIONS.index(s.region)
        if s.kind == "deploy":
            if key not in versions:  # the version running when the panel starts
                versions[key] = (10 + int(50 * s.u[2]), int(9 * s.u[1]))
            minor, patch = versions[key]
            new = (minor, patch + 1) if s.u[0] < 0.6 else (minor + 1, 0)
            versions[key] = new
            rows.append(
                Change(
                    s.bucket,
                    s.minute,
                    s.service,
                    s.region,
                    "deploy",
                    "version",
                    _version(minor, patch),
                    _version(*new),
                    s.author,
                )
            )
            continue
        old = shown_pool.get(key, round(float(pools[cell, max(s.bucket - 1, 0)])))
        if s.kind == "pool" and s.cause:
            new = max(round(float(pools[cell, s.bucket])), 1)
            shown_pool[key] = new
            rows.append(_pool_row(s, old, new))
            continue
        if s.kind == "pool":
            cut = cuts.get(key)
            until = cut if cut is not None and cut > s.bucket else n
            after_cut = cut is not None and cut <= s.bucket
            peak = float(in_flight[cell, s.bucket : max(until, s.bucket + 1)].max())
            binding = after_cut or peak >= min(old, float(pools[cell, s.bucket]))
            if not binding:
                floor = SAFE_MARGIN[0] + (SAFE_MARGIN[1] - SAFE_MARGIN[0]) * s.u[0]
                target = int(np.ceil(floor * peak))
                if cut is not None and cut > s.bucket:
                    target = max(target, int(np.ceil(CUT_MARGIN * float(pools[cell, cut]))) + 1)
                target = max(target, 1)
                new = target if target < old else old + 4 * (1 + int(3 * s.u[1]))
                shown_pool[key] = new
                rows.append(_pool_row(s, old, new))
                continue
        # another config key (or a pool resize that could not be harmless here)
        fields = list(OTHER_FIELDS)
        name = fields[int(s.u[1] * len(fields))]
        choices = OTHER_FIELDS[name]
        before, after = choices[int(s.u[2] * len(choices))]
        rows.append(
            Change(s.bucket, s.minute, s.service, s.region, "config", name, before, after, s.author)
        )
    return rows


def _pool_row(s: ChangeSlot, old: int, new: int) -> Change:
    return Change(
        s.bucket, s.minute, s.service, s.region, "config", POOL_FIELD, str(old), str(new), s.author
    )


def change_log(panel: Panel, rows: Sequence[Change], limit: int) -> pd.DataFrame:
    """The latest ``limit`` changes, newest first (the log's length never depends on the
    cause)."""
    times = panel.time.values.astype("datetime64[m]")
    stamps = np.array(
        [times[c.bucket] + np.timedelta64(c.minute, "m") for c in rows], dtype="datetime64[m]"
    )
    order = np.argsort(-stamps.astype(np.int64), kind="stable")[:limit]
    chosen = [rows[i] for i in order]
    frame = pd.DataFrame(
        {
            "change_time": stamps[order].astype("datetime64[us]"),
            "service": [c.service for c in chosen],
            "region": [c.region for c in chosen],
            "change_type": [c.change_type for c in chosen],
            "field": [c.field for c in chosen],
            "old_value": [c.old_value for c in chosen],
            "new_value": [c.new_value for c in chosen],
            "author": [c.author for c in chosen],
        }
    )
    return frame.reset_index(drop=True)
