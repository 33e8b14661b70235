"""The services teacher: from the page to the cause, one query per hypothesis worth testing.

It reads the page (which KPI of which service paged, in which region), the call graph (what the
alerted services depend on: the candidates), the alerted series (when it moved: the onset) and
the change log around the onset (which deploys and config edits could be behind it). Each cause
still in play is a hypothesis over its slices; the next query measures the footprint of the
cause whose outcome is the least certain (the largest binary entropy of its share of the
belief; ties broken by the episode's rng), and the teacher says what the numbers show before it
decides. A footprint fires when its weaker measure moved by ``SNR_MIN`` spreads and ``Z_MIN``
standard errors. A fired cause is final once every deeper cause (``PRIORITY``: a cache that
lost nodes loads its database, a saturated or slow database backs up its callers) has been
measured and has not fired; nothing firing is a false alarm.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from causaltrace.agents import Agent
from causaltrace.agents.result_tables import num, parse_table
from causaltrace_domains.services.teacher.footprints import (
    FOOTPRINTS,
    PRIORITY,
    Reading,
    everywhere,
    footprint_sql,
    readings,
)
from causaltrace_domains.services.teacher.narrate import Voice
from causaltrace_domains.services.teacher.page import Page, parse_page

SNR_MIN = 2.0
Z_MIN = 4.0  # one onset, about 60 slices and causes: Bonferroni at 0.05 is z 3.2
NO_ANOMALY = "NO_ANOMALY"
# Which causes can move each paged KPI (the causes' descriptions in the prompt): the others
# start with a fifth of the weight.
MOVES = {
    "requests": {"TRAFFIC_SURGE"},
    "error_rate": {
        "BAD_DEPLOY",
        "CONFIG_CHANGE",
        "SLOW_DEPENDENCY",
        "DB_REPLICA_SATURATION",
        "CACHE_NODE_LOSS",
        "NOISY_NEIGHBOUR",
        "TRAFFIC_SURGE",
    },
    "latency_p99_ms": {
        "SLOW_DEPENDENCY",
        "DB_REPLICA_SATURATION",
        "NOISY_NEIGHBOUR",
        "CACHE_NODE_LOSS",
        "CONFIG_CHANGE",
        "BAD_DEPLOY",
        "TRAFFIC_SURGE",
    },
    "queue_depth": {
        "QUEUE_CONSUMER_STALL",
        "SLOW_DEPENDENCY",
        "DB_REPLICA_SATURATION",
        "NOISY_NEIGHBOUR",
        "TRAFFIC_SURGE",
    },
}
UNLIKELY = 0.2
CHANGE_BOOST = 2.0  # a deploy or config edit of a candidate near the onset
CHANGE_CAUSES = {"deploy": "BAD_DEPLOY", "config": "CONFIG_CHANGE"}
# The order queue's consumer writes each order to orders_db (the data dictionary says so; the
# call graph lists the request path only).
CONSUMES = {"order_queue": ("orders_db",)}
TIE = 0.02  # nats: probes within this of the best are equally useful
SERIES_HOURS = 6
ONSET_BUCKETS = (4, 13)  # the onset is 4 to 13 buckets before the end of the data
_LEVELS = re.compile(r"^- (service|region): (.+)$", re.MULTILINE)


@dataclass
class Investigation:
    """What the teacher knows so far."""

    page: Page
    regions: tuple[str, ...]
    weight: dict[str, float]
    candidates: dict[str, tuple[str, ...]] = field(default_factory=dict)
    measured: set[str] = field(default_factory=set)
    fired: dict[str, Reading] = field(default_factory=dict)
    onset: str | None = None

    def open_causes(self) -> list[str]:
        """Causes not yet measured that could still change the answer: all of them while
        nothing fired, then only those deeper than the deepest that fired."""
        deepest = min((PRIORITY.index(c) for c in self.fired), default=len(PRIORITY))
        return [
            c
            for c in PRIORITY[:deepest]
            if c not in self.measured and self.weight.get(c, 0.0) > 0.0
        ]

    def share(self, cause: str) -> float:
        """The cause's share of the belief over the open causes and a false alarm."""
        open_causes = self.open_causes()
        total = sum(self.weight[c] for c in open_causes) + self.weight[NO_ANOMALY]
        return self.weight[cause] / total if total else 0.0

    def answer(self) -> tuple[str, str]:
        if not self.fired:
            return NO_ANOMALY, ""
        cause = min(self.fired, key=PRIORITY.index)
        return cause, self.fired[cause].slice_text()


def _entropy(p: float) -> float:
    return -sum(q * math.log(q) for q in (p, 1.0 - p) if 0.0 < q < 1.0)


def _closure(graph: list[dict[str, str]], start: tuple[str, ...]) -> tuple[str, ...]:
    """The services ``start`` depends on, directly or not, with themselves, and the caches
    whose misses land on any of them (a cache that lost nodes loads the database behind it,
    whoever pages)."""
    edges = [(r.get("caller"), r.get("callee")) for r in graph]
    seen, todo = list(start), list(start)
    while todo:
        caller = todo.pop()
        for callee in [b for a, b in edges if a == caller] + list(CONSUMES.get(caller, ())):
            if callee not in seen:
                seen.append(callee)
                todo.append(callee)
    for r in graph:
        cache = r.get("only_on_miss_of")
        if cache and r.get("callee") in seen and cache not in seen:
            seen.append(cache)
    return tuple(seen)


def _onset(rows: list[dict[str, str]], column: str) -> tuple[int, float, float, float]:
    """The bucket where the alerted series shifts most (index into rows), with the means
    before and after and the shift's z (on logs: rates and depths move multiplicatively)."""
    values = np.log(np.array([num(r.get(column)) for r in rows]) + 1e-3)
    n = len(values)
    best = (max(n - ONSET_BUCKETS[0], 1), 0.0, 0.0, -math.inf)
    for i in range(max(n - ONSET_BUCKETS[1], 2), n - ONSET_BUCKETS[0] + 1):
        before, after = values[:i], values[i:]
        spread = max(float(np.std(before, ddof=1)), 0.02)
        z = (after.mean() - before.mean()) / (spread * math.sqrt(1 / len(after) + 1 / len(before)))
        if z > best[3]:
            best = (i, float(np.exp(before.mean())), float(np.exp(after.mean())), float(z))
    return best


def _series_sql(page: Page, start: str) -> tuple[str, str]:
    """The first alert's KPI per 15-minute bucket (the query, its value column)."""
    alert = page.alerts[0]
    where = f"region = '{alert.region}' AND ts >= TIMESTAMP '{start}'"
    if alert.kpi == "queue_depth":
        return (
            f"SELECT ts, depth FROM queue_metrics WHERE queue = '{alert.service}' AND {where} "
            "ORDER BY ts",
            "depth",
        )
    expr, column = {
        "error_rate": ("ROUND(100.0 * errors / GREATEST(requests, 1), 3)", "error_rate_pct"),
        "latency_p99_ms": ("latency_p99_ms", "latency_p99_ms"),
        "requests": ("requests", "requests"),
    }[alert.kpi]
    return (
        f"SELECT ts, {expr} AS {column} FROM service_metrics "
        f"WHERE service = '{alert.service}' AND {where} ORDER BY ts",
        column,
    )


class ServicesInvestigator(Agent):
    """The hypothesis-driven services teacher (module docstring)."""

    name = "services_teacher"

    async def _ask(self, session, query: str, thought: str) -> list[dict[str, str]]:
        results = await session.turn([{"name": "sql", "arguments": {"query": query}}], thought)
        return parse_table(results[0].observation) if results else []

    async def run(self, session, rng: np.random.Generator) -> None:
        page = parse_page(session.prompt)
        voice = Voice(rng)
        levels = {k: tuple(v.split(", ")) for k, v in _LEVELS.findall(session.prompt)}
        if not page.alerts:
            await self._submit(session, NO_ANOMALY, "", voice.no_page())
            return
        weight = {
            c: 1.0 if any(c in MOVES[a.kpi] for a in page.alerts) else UNLIKELY for c in PRIORITY
        }
        weight[NO_ANOMALY] = UNLIKELY
        inv = Investigation(page, levels.get("region", page.regions), weight)
        text = voice.opening(page, [c for c in PRIORITY if weight[c] == 1.0])

        # The candidates: what the alerted services depend on.
        graph = await self._ask(
            session,
            "SELECT caller, callee, call, calls_per_request, only_on_miss_of FROM call_graph",
            text,
        )
        if session.done:
            return
        reach = _closure(graph, page.services)
        for cause, fp in FOOTPRINTS.items():
            inv.candidates[cause] = tuple(s for s in fp.services if s in reach)
            if fp.services and not inv.candidates[cause]:
                inv.weight[cause] = 0.0
        text = voice.graph(page, graph, reach)

        # When: the alerted series.
        end = page.alerts[0].end
        start = str(np.datetime64(end.replace(" ", "T")) - np.timedelta64(SERIES_HOURS, "h"))
        query, column = _series_sql(page, start.replace("T", " ")[:16])
        series = await self._ask(session, query, text + " " + voice.when(page.alerts[0]))
        if session.done:
            return
        if len(series) < ONSET_BUCKETS[1] + 2:
            await self._submit(session, NO_ANOMALY, "", voice.unreadable())
            return
        index, before, after, z = _onset(series, column)
        inv.onset = series[index]["ts"][:16]
        text = voice.onset(
            inv.onset, series[index - 1][column], series[index][column], before, after, z
        )

        # What changed around then (a deploy or config edit of a candidate raises its cause).
        changes = await self._ask(
            session,
            "SELECT change_time, service, region, change_type, field, old_value, new_value "
            f"FROM change_log WHERE change_time >= TIMESTAMP '{inv.onset}' - INTERVAL 1 HOUR "
            "ORDER BY change_time",
            text + " " + voice.ask_changes(inv.onset),
        )
        if session.done:
            return
        near = [
            r
            for r in changes
            if r.get("change_type") in CHANGE_CAUSES
            and r.get("region") in page.regions
            and r.get("service") in reach
        ]
        for kind, cause in CHANGE_CAUSES.items():
            found = any(r["change_type"] == kind for r in near)
            inv.weight[cause] *= CHANGE_BOOST if found else 1.0 / CHANGE_BOOST
        text = voice.changes(changes, near)

        while not session.done:
            open_causes = inv.open_causes()
            if not open_causes:
                break
            gains = {c: _entropy(inv.share(c)) for c in open_causes}
            best = max(gains.values())
            tied = [c for c in open_causes if gains[c] >= best - TIE]
            cause = tied[int(rng.integers(len(tied)))]
            fp = FOOTPRINTS[cause]
            regions = inv.regions if fp.all_regions else page.regions
            query = footprint_sql(fp, inv.candidates.get(cause, ()), regions, inv.onset)
            rows = await self._ask(
                session, query, text + " " + voice.ask(cause, inv.candidates.get(cause, ()))
            )
            if session.done:
                return
            inv.measured.add(cause)
            found = readings(fp, rows)
            strongest = self._strongest(fp.all_regions, found, inv.regions)
            wide = strongest is not None and fp.all_regions and strongest.region is None
            if strongest is not None and _fires(strongest, wide=wide):
                inv.fired[cause] = strongest
                inv.weight[cause] *= math.exp(min(strongest.z, 30.0))
            else:
                inv.weight[cause] *= math.exp(-2.0)
            text = voice.reading(cause, found, strongest, fired=cause in inv.fired)

        cause, slice_text = inv.answer()
        await self._submit(session, cause, slice_text, text + " " + voice.conclude(inv))

    @staticmethod
    def _strongest(
        service_wide: bool, found: list[Reading], regions: tuple[str, ...]
    ) -> Reading | None:
        """The reading that decides: for a dependency, its service-wide footprint when every
        region shows it, else its strongest region."""
        if not found:
            return None
        if service_wide:
            by_service: dict[str, list[Reading]] = {}
            for r in found:
                by_service.setdefault(str(r.service), []).append(r)
            wide = [everywhere(rs, regions) for rs in by_service.values()]
            wide = [w for w in wide if w is not None and _fires(w, wide=True)]
            if wide:
                return max(wide, key=lambda r: r.z)
        return max(found, key=lambda r: r.z)

    async def _submit(self, session, cause: str, slice_text: str, thought: str) -> None:
        if not session.done:
            await session.turn(
                [{"name": "submit", "arguments": {"root_cause": cause, "slice": slice_text}}],
                thought,
            )


def _fires(reading: Reading, wide: bool = False) -> bool:
    """Large and far beyond chance; a service-wide reading (its weakest region) needs half
    the z in each region, as three regions agreeing are themselves evidence."""
    z_min = Z_MIN / 2 if wide else Z_MIN
    return reading.snr >= SNR_MIN and reading.z >= z_min
