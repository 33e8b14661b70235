"""Each cause's footprint as an SRE measures it: one short SQL query per cause, before and after.

A footprint is one or two per-bucket measures on a (service, region) that the cause moves and
its confusers do not (a saturated database burns more CPU per query; a slow dependency takes
longer per request without more CPU; a noisy neighbour shows as steal). The query returns, per
slice, each measure's mean and spread over the eight hours before the onset and its mean after
it; :func:`shift` turns that into an effect, an SNR (effect over the bucket-to-bucket spread,
floored at a practical size) and a z (over the two means' standard error). A two-measure
footprint is as strong as its weaker measure: both must move. The measures are those the
scripted teacher's notebook scanned (``notebook.py``), written as the SQL an analyst types.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from causaltrace.agents.result_tables import num

PRE_HOURS = 8  # the baseline: the eight hours before the onset


@dataclass(frozen=True)
class Measure:
    name: str  # the column stem in the query's result
    label: str  # what an SRE calls it
    sql: str  # a per-bucket expression over the query's joined row
    direction: int  # +1: the cause raises it; -1: lowers it
    floor: float  # the smallest spread that counts (a practical size)
    log: bool = False  # the expression is a log: report its change in percent
    after: str = "AVG"  # how the buckets after the onset are summarised (MEDIAN: a brief dip)


@dataclass(frozen=True)
class Footprint:
    cause: str
    table: str  # "app": service_metrics x saturation; "cache"; "queue"; "traffic"
    measures: tuple[Measure, ...]
    services: tuple[str, ...]  # the slice levels the cause can take
    all_regions: bool = False  # measured in every region (a dependency slow everywhere)


_REQ = "GREATEST(m.requests, 1)"
FOOTPRINTS: dict[str, Footprint] = {
    f.cause: f
    for f in (
        Footprint(
            "TRAFFIC_SURGE",
            "traffic",
            (
                Measure(
                    "lift",
                    "frontend requests over the same time on the 2 days before",
                    "lift",
                    +1,
                    0.05,
                    log=True,
                ),
            ),
            (),
        ),
        Footprint(
            "CACHE_NODE_LOSS",
            "cache",
            (Measure("hit_rate", "hit rate", "c.hits / GREATEST(c.lookups, 1)", -1, 0.01),),
            ("product_cache", "session_cache"),
        ),
        Footprint(
            "DB_REPLICA_SATURATION",
            "app",
            (
                Measure(
                    "cpu_per_query",
                    "CPU per query (steal left out)",
                    f"LN(GREATEST(s.cpu_pct * GREATEST(1 - s.cpu_steal_pct / 100, 0.01), 0.01)"
                    f" / {_REQ})",
                    +1,
                    0.08,
                    log=True,
                ),
            ),
            ("catalog_db", "orders_db"),
        ),
        Footprint(
            "SLOW_DEPENDENCY",
            "app",
            (
                Measure(
                    "time_per_work",
                    "service time per unit of CPU work",
                    "LN(GREATEST(m.latency_p50_ms * GREATEST(1 - s.cpu_pct / 100, 0.005), 1e-6))"
                    f" - LN(GREATEST(s.cpu_pct, 0.01) / {_REQ})",
                    +1,
                    0.1,
                    log=True,
                ),
            ),
            ("payments_api", "search_index", "catalog_db", "orders_db"),
            all_regions=True,
        ),
        Footprint(
            "NOISY_NEIGHBOUR",
            "app",
            (
                Measure("steal", "CPU steal (points)", "s.cpu_steal_pct", +1, 2.0),
                Measure(
                    "cpu_per_request",
                    "CPU per request",
                    f"LN(GREATEST(s.cpu_pct, 0.01) / {_REQ})",
                    +1,
                    0.08,
                    log=True,
                ),
            ),
            ("frontend", "catalog", "cart", "checkout", "catalog_db", "orders_db", "search_index"),
        ),
        Footprint(
            "BAD_DEPLOY",
            "app",
            (
                Measure(
                    "error_rate", "error rate", f"LN((m.errors + 1) / {_REQ})", +1, 0.3, log=True
                ),
                Measure("memory", "memory (points)", "s.memory_pct", +1, 3.0),
            ),
            ("frontend", "catalog", "cart", "checkout"),
        ),
        Footprint(
            "CONFIG_CHANGE",
            "app",
            (
                Measure(
                    "waiting",
                    "share of requests waiting for a connection",
                    "s.connections_pending / GREATEST(s.connections_pending"
                    " + s.connections_active, 1e-9)",
                    +1,
                    0.05,
                ),
                Measure(
                    "held",
                    "connections held per request/s",
                    "LN(GREATEST(s.connections_active, 1e-3) / GREATEST(m.requests / 900.0, 1e-3))",
                    -1,
                    0.05,
                    log=True,
                ),
            ),
            ("frontend", "catalog", "cart", "checkout"),
        ),
        Footprint(
            "QUEUE_CONSUMER_STALL",
            "queue",
            (
                Measure(
                    "lag",
                    "backlog in seconds of publishing",
                    "LN(q.depth / GREATEST(q.published / 900.0, 1e-3) + 1)",
                    +1,
                    0.3,
                    log=True,
                ),
                Measure(
                    "consumers",
                    "live consumers",
                    "LN(GREATEST(q.consumers, 1e-2))",
                    -1,
                    0.1,
                    log=True,
                    after="MEDIAN",
                ),  # a rebalance is brief
            ),
            ("order_queue",),
        ),
    )
}
# Deeper causes first: a cache that lost nodes loads its database, a saturated or slow database
# backs up the order queue and its callers' pools, a surge loads everything. A footprint that a
# deeper cause at work also makes is its symptom, not a second finding.
PRIORITY = tuple(FOOTPRINTS)


def _timestamp(text: str) -> str:
    return f"TIMESTAMP '{text}'"


def footprint_sql(
    fp: Footprint, services: Sequence[str], regions: Sequence[str], onset: str
) -> str:
    """The query: per slice, n/mean/spread before the onset and n/mean after, per measure."""
    t0 = _timestamp(onset)
    start = f"{t0} - INTERVAL {PRE_HOURS} HOUR"
    cols = []
    for m in fp.measures:
        cols += [
            f"ROUND(AVG({m.name}) FILTER (WHERE ts < {t0}), 4) AS {m.name}_before",
            f"ROUND(STDDEV_SAMP({m.name}) FILTER (WHERE ts < {t0}), 4) AS {m.name}_sd",
            f"ROUND({m.after}({m.name}) FILTER (WHERE ts >= {t0}), 4) AS {m.name}_after",
        ]
    counts = (
        f"COUNT(*) FILTER (WHERE ts < {t0}) AS n_before, "
        f"COUNT(*) FILTER (WHERE ts >= {t0}) AS n_after"
    )
    exprs = ", ".join(f"{m.sql} AS {m.name}" for m in fp.measures)
    region_list = ", ".join(f"'{r}'" for r in regions)
    if fp.table == "traffic":
        return (
            "WITH r AS (SELECT ts, SUM(requests) AS req FROM service_metrics "
            "WHERE service = 'frontend' GROUP BY ts), "
            "x AS (SELECT a.ts, LN(a.req / ((b.req + c.req) / 2.0)) AS lift FROM r a "
            "JOIN r b ON b.ts = a.ts - INTERVAL 1 DAY JOIN r c ON c.ts = a.ts - INTERVAL 2 DAY "
            f"WHERE a.ts >= {start}) "
            f"SELECT {counts}, {', '.join(cols)} FROM x"
        )
    service_list = ", ".join(f"'{s}'" for s in services)
    if fp.table == "cache":
        source = (
            f"SELECT c.ts, c.cache AS service, c.region, {exprs} FROM cache_metrics c "
            f"WHERE c.cache IN ({service_list}) AND c.region IN ({region_list}) "
            f"AND c.ts >= {start}"
        )
    elif fp.table == "queue":
        source = (
            f"SELECT q.ts, q.queue AS service, q.region, {exprs} FROM queue_metrics q "
            f"WHERE q.region IN ({region_list}) AND q.ts >= {start}"
        )
    else:
        source = (
            f"SELECT m.ts, m.service, m.region, {exprs} FROM service_metrics m "
            "JOIN saturation s USING (ts, service, region) "
            f"WHERE m.service IN ({service_list}) AND m.region IN ({region_list}) "
            f"AND m.ts >= {start}"
        )
    return (
        f"SELECT service, region, {counts}, {', '.join(cols)} FROM ({source}) "
        "GROUP BY service, region ORDER BY service, region"
    )


@dataclass(frozen=True)
class Shift:
    """One measure's move after the onset (``shown``: the before and after values as the
    query printed them, for the teacher to quote)."""

    before: float
    after: float
    effect: float  # direction x (after - before)
    snr: float  # effect over the baseline's spread (floored)
    z: float  # effect over the standard error of the difference of the two means
    log: bool
    shown: tuple[str, str] = ("", "")

    def change_text(self) -> str:
        if self.log:
            return f"{math.expm1(self.after - self.before):+.0%}"
        return f"{self.after - self.before:+.3g}"


def shift(row: Mapping[str, str], measure: Measure) -> Shift:
    n_pre, n_post = max(num(row.get("n_before")), 2.0), max(num(row.get("n_after")), 1.0)
    before_text = row.get(f"{measure.name}_before", "")
    after_text = row.get(f"{measure.name}_after", "")
    before, after = num(before_text), num(after_text)
    spread = max(num(row.get(f"{measure.name}_sd")), measure.floor)
    effect = measure.direction * (after - before)
    z = effect / (spread * math.sqrt(1 / n_post + 1 / n_pre))
    return Shift(before, after, effect, effect / spread, z, measure.log, (before_text, after_text))


@dataclass(frozen=True)
class Reading:
    """A footprint on one slice: its measures' shifts, and its strength (the weaker one)."""

    cause: str
    service: str | None
    region: str | None
    shifts: tuple[tuple[Measure, Shift], ...]

    @property
    def z(self) -> float:
        return min(s.z for _, s in self.shifts)

    @property
    def snr(self) -> float:
        return min(s.snr for _, s in self.shifts)

    def slice_text(self) -> str:
        if self.service is None:
            return ""
        return f"service={self.service}" + (f"&region={self.region}" if self.region else "")


def readings(fp: Footprint, rows: Sequence[Mapping[str, str]]) -> list[Reading]:
    out = []
    for row in rows:
        shifts = tuple((m, shift(row, m)) for m in fp.measures)
        service = row.get("service") or None
        region = row.get("region") or None
        out.append(Reading(fp.cause, service, region, shifts))
    return out


def everywhere(per_region: Sequence[Reading], regions: Sequence[str]) -> Reading | None:
    """A dependency's footprint in every region as one service-wide reading (its weakest
    region's shifts), if every region was read."""
    if not per_region or {r.region for r in per_region} != set(regions):
        return None
    weakest = min(per_region, key=lambda r: r.z)
    return Reading(weakest.cause, weakest.service, None, weakest.shifts)
