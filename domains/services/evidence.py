"""Signature statistics of the services causes, computed from the agent-visible tables alone.

Each statistic is a per-bucket series over the candidate cells (only the cells of the kind the
cause can hit: app services, databases, caches, dependencies, the queue), compared after the
onset with the ``PRE`` buckets before it: the effect is the mean shift in the cause's direction,
the noise the standard deviation of the series before the onset (floored by a practical
minimum: a smaller move is not worth a page). Every series is chosen to be flat over the day
when nothing is wrong, so the traffic cycle does not masquerade as a cause:

- TRAFFIC_SURGE: log frontend requests (all regions) over the mean of the same bucket on the two
  previous days (whole system only);
- SLOW_DEPENDENCY: log of the dependency's service time, p50 x (1 - CPU) (the utilisation
  law's time a request takes without queueing: load and queueing cancel), over its CPU per
  request: time not spent on CPU work. A slow dependency raises it; a saturated database
  (more CPU time per query) lowers it;
- DB_REPLICA_SATURATION: log of the host CPU per query, CPU x (1 - steal) / requests (the
  CPU the replica burns per query, whoever else is on the host): a replica busy with other work
  raises it; a noisy neighbour does not (the CPU it takes shows as steal, not as work);
- NOISY_NEIGHBOUR: CPU steal rising AND CPU per request rising (the weaker of the two): a
  co-tenant's share of the hosts, and the service slowed by it (hosts we share: app services,
  databases, the search cluster);
- CACHE_NODE_LOSS: hit rate (falls);
- BAD_DEPLOY: log error rate AND memory (both must rise: the weaker of the two);
- CONFIG_CHANGE: share of connections pending (requests waiting for a pooled connection) AND
  connections in use per request/s falling (the pool now holds fewer than requests needed before;
  load or latency that exhausts an unchanged pool raises them instead);
- QUEUE_CONSUMER_STALL: log queue lag in seconds (depth over the publish rate) rising AND
  live consumers falling (medians: a rebalance pausing them for a bucket or two is not a
  stall) (the weaker of the two): a slow or saturated orders_db backs the queue up too, but
  stops no worker.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from causaltrace import Panel
from causaltrace.episodes.verify import Statistic
from causaltrace_domains.services.topology import (
    APP,
    BUCKET_SECONDS,
    BUCKETS_PER_DAY,
    CACHES,
    DATABASES,
    DEPENDENCIES,
    QUEUE,
    SHARED_HOSTS,
)

PRE = 32  # eight hours before the onset
FLOORS = {
    "TRAFFIC_SURGE": 0.05,
    "SLOW_DEPENDENCY": 0.1,
    "DB_REPLICA_SATURATION": 0.08,
    "NOISY_NEIGHBOUR": 0.08,
    "steal": 2.0,  # percentage points
    "CACHE_NODE_LOSS": 0.01,
    "error": 0.3,
    "memory": 3.0,
    "CONFIG_CHANGE": 0.05,
    "held": 0.05,
    "QUEUE_CONSUMER_STALL": 0.3,
    "consumers": 0.1,
}
KINDS = {
    "SLOW_DEPENDENCY": DEPENDENCIES,
    "DB_REPLICA_SATURATION": DATABASES,
    "NOISY_NEIGHBOUR": SHARED_HOSTS,
    "CACHE_NODE_LOSS": CACHES,
    "BAD_DEPLOY": APP,
    "CONFIG_CHANGE": APP,
    "QUEUE_CONSUMER_STALL": (QUEUE,),
}


def dense(panel: Panel, frame: pd.DataFrame, columns, names=("service", "region")) -> dict:
    """Columns of a long table as (n_cells, T) arrays (cells absent from it stay 0)."""
    times = panel.time.values.astype("datetime64[us]")
    t = np.searchsorted(times, frame["ts"].to_numpy().astype("datetime64[us]"))
    codes = []
    for dim, name in zip(("service", "region"), names):
        levels = list(panel.dimension(dim).levels)
        codes.append(
            pd.Categorical(frame[name].astype(str), categories=levels).codes.astype(np.int64)
        )
    cell = codes[0] * len(panel.dimension("region").levels) + codes[1]
    flat = cell * panel.n_time + t
    size = panel.n_cells * panel.n_time
    return {
        c: np.bincount(flat, weights=frame[c].to_numpy(np.float64), minlength=size).reshape(
            panel.n_cells, panel.n_time
        )
        for c in columns
    }


class ServicesEvidence:
    def __init__(self, panel: Panel, tables: Mapping[str, pd.DataFrame]):
        self.panel = panel
        self.n = panel.n_time
        sm = dense(
            panel,
            tables["service_metrics"],
            ("requests", "errors", "latency_p50_ms", "latency_p99_ms"),
        )
        sat = dense(
            panel,
            tables["saturation"],
            ("cpu_pct", "cpu_steal_pct", "memory_pct", "connections_active", "connections_pending"),
        )
        cache = dense(panel, tables["cache_metrics"], ("lookups", "hits"), ("cache", "region"))
        queue = dense(
            panel, tables["queue_metrics"], ("published", "consumers", "depth"), ("queue", "region")
        )
        self.a = {**sm, **sat, **cache, **queue}
        services = panel.labels("service")
        self.kind = {k: np.isin(services, list(v)) for k, v in KINDS.items()}
        self.frontend = services == "frontend"

    def _shift(
        self, series: np.ndarray, onset: int, direction: float, floor: float, centre=np.mean
    ):
        """The shift of ``series`` from ``onset`` on against the ``PRE`` buckets before, in
        the cause's direction; ``centre`` np.median ignores a pause shorter than half the
        buckets after the onset (a rebalance, not a stall)."""
        if onset < PRE or onset >= self.n:
            return None
        pre, post = series[onset - PRE : onset], series[onset:]
        if not (np.all(np.isfinite(pre)) and np.all(np.isfinite(post))):
            return None
        effect = float(direction * (centre(post) - centre(pre)))
        noise = max(float(np.std(pre, ddof=1)), floor)
        return Statistic.from_daily(effect, noise, len(post), len(pre))

    def statistic(self, cause, cells, onset, reference=None):
        a = self.a
        if cause == "TRAFFIC_SURGE":
            if cells is not None:
                return None
            req = a["requests"][self.frontend].sum(axis=0)
            past = np.full(self.n, np.nan)
            d = BUCKETS_PER_DAY
            past[2 * d :] = 0.5 * (req[d:-d] + req[: -2 * d])
            return self._shift(np.log(req / past), onset, +1, FLOORS[cause])
        if cause not in KINDS:
            return None
        mask = self.kind[cause] if cells is None else cells & self.kind[cause]
        if not mask.any():
            return None
        floor = FLOORS.get(cause)
        if cause == "SLOW_DEPENDENCY":
            req = a["requests"][mask]
            cpu = a["cpu_pct"][mask]
            time = a["latency_p50_ms"][mask] * np.maximum(1.0 - cpu / 100.0, 0.005)
            service_time = (req * time).sum(axis=0) / np.maximum(req.sum(axis=0), 1.0)
            work = np.exp(np.log(cpu / np.maximum(req, 1.0)).mean(axis=0))
            return self._shift(np.log(service_time / work), onset, +1, floor)
        if cause == "DB_REPLICA_SATURATION":
            host = a["cpu_pct"][mask] * np.maximum(1.0 - a["cpu_steal_pct"][mask] / 100.0, 0.01)
            per = host / np.maximum(a["requests"][mask], 1.0)
            return self._shift(np.log(per).mean(axis=0), onset, +1, floor)
        if cause == "NOISY_NEIGHBOUR":
            per = a["cpu_pct"][mask] / np.maximum(a["requests"][mask], 1.0)
            return Statistic.weakest(
                self._shift(a["cpu_steal_pct"][mask].mean(axis=0), onset, +1, FLOORS["steal"]),
                self._shift(np.log(per).mean(axis=0), onset, +1, floor),
            )
        if cause == "CACHE_NODE_LOSS":
            rate = a["hits"][mask].sum(axis=0) / np.maximum(a["lookups"][mask].sum(axis=0), 1.0)
            return self._shift(rate, onset, -1, floor)
        if cause == "BAD_DEPLOY":
            err = np.log(
                (a["errors"][mask].sum(axis=0) + 1.0)
                / np.maximum(a["requests"][mask].sum(axis=0), 1.0)
            )
            mem = a["memory_pct"][mask].mean(axis=0)
            return Statistic.weakest(
                self._shift(err, onset, +1, FLOORS["error"]),
                self._shift(mem, onset, +1, FLOORS["memory"]),
            )
        if cause == "CONFIG_CHANGE":
            pending = a["connections_pending"][mask].sum(axis=0)
            active = a["connections_active"][mask].sum(axis=0)
            rate = a["requests"][mask].sum(axis=0) / BUCKET_SECONDS
            return Statistic.weakest(
                self._shift(pending / np.maximum(pending + active, 1e-9), onset, +1, floor),
                self._shift(
                    np.log(np.maximum(active, 1e-3) / np.maximum(rate, 1e-3)),
                    onset,
                    -1,
                    FLOORS["held"],
                ),
            )
        # QUEUE_CONSUMER_STALL: seconds of backlog, and fewer live consumers
        rate = a["published"][mask].sum(axis=0) / BUCKET_SECONDS
        lag = a["depth"][mask].sum(axis=0) / np.maximum(rate, 1e-3)
        live = np.log(np.maximum(a["consumers"][mask].sum(axis=0), 1e-2))
        return Statistic.weakest(
            self._shift(np.log(lag + 1.0), onset, +1, floor),
            self._shift(live, onset, -1, FLOORS["consumers"], centre=np.median),
        )
