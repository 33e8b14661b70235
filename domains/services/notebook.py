# ruff: noqa: F821  (service_metrics and the other tables are preloaded by the python tool)
"""The services teacher's notebook: plain pandas and numpy, sent verbatim to the python tool.

The sandbox cannot import causaltrace, so the teacher ships its analysis as source text. It
turns the metrics tables into (service, region) x bucket arrays and defines ``scan()``, which
measures each cause's footprint on each candidate slice (the shift after an onset against the
eight hours before, in units of the bucket-to-bucket noise before it) and prints JSON.
"""

import json  # noqa: F401  (the teacher prints JSON with it)

import numpy as np
import pandas as pd

APP = ["frontend", "catalog", "cart", "checkout"]
KINDS = {
    "SLOW_DEPENDENCY": ["payments_api", "search_index", "catalog_db", "orders_db"],
    "DB_REPLICA_SATURATION": ["catalog_db", "orders_db"],
    "NOISY_NEIGHBOUR": [*APP, "catalog_db", "orders_db", "search_index"],
    "CACHE_NODE_LOSS": ["product_cache", "session_cache"],
    "BAD_DEPLOY": APP,
    "CONFIG_CHANGE": APP,
    "QUEUE_CONSUMER_STALL": ["order_queue"],
}
FLOORS = {
    "TRAFFIC_SURGE": 0.05,
    "SLOW_DEPENDENCY": 0.1,
    "DB_REPLICA_SATURATION": 0.08,
    "NOISY_NEIGHBOUR": 0.08,
    "steal": 2.0,
    "CACHE_NODE_LOSS": 0.01,
    "error": 0.3,
    "memory": 3.0,
    "CONFIG_CHANGE": 0.05,
    "held": 0.05,
    "QUEUE_CONSUMER_STALL": 0.3,
    "consumers": 0.1,
}
PRE = 32


def _wide(frame, keys, values):
    frame = frame.assign(ts=pd.to_datetime(frame["ts"]))
    wide = frame.pivot_table(index=keys, columns="ts", values=values, aggfunc="sum", observed=True)
    wide = wide.sort_index(axis=1)
    return {v: wide[v] for v in values}


SM = _wide(
    service_metrics,
    ["service", "region"],
    ["requests", "errors", "latency_p50_ms", "latency_p99_ms"],
)
SAT = _wide(
    saturation,
    ["service", "region"],
    ["cpu_pct", "cpu_steal_pct", "memory_pct", "connections_active", "connections_pending"],
)
CACHE = _wide(cache_metrics, ["cache", "region"], ["lookups", "hits"])
QUEUE = _wide(queue_metrics, ["queue", "region"], ["published", "consumers", "depth"])
N = SM["requests"].shape[1]
REGIONS = sorted(service_metrics["region"].astype(str).unique())


def _rows(table, service, region=None):
    """Rows of ``service`` (in ``region``, or every region) as an array (rows x buckets)."""
    index = table.index
    mask = index.get_level_values(0).astype(str) == service
    if region is not None:
        mask &= index.get_level_values(1).astype(str) == region
    return table[mask].to_numpy(float)


def _shift(series, t0, direction, floor, centre=np.mean):
    pre, post = series[t0 - PRE : t0], series[t0:]
    effect = float(direction * (centre(post) - centre(pre)))
    noise = max(float(np.std(pre, ddof=1)), floor)
    z = effect / (noise * np.sqrt(1 / len(post) + 1 / len(pre)))
    return {"effect": effect, "snr": effect / noise, "z": float(z)}


def footprint(cause, service=None, region=None, t0=None):
    """The cause's footprint on the slice (service, region) from bucket t0 on."""
    if cause == "TRAFFIC_SURGE":
        req = _rows(SM["requests"], "frontend").sum(axis=0)
        d = 96
        past = np.full(N, np.nan)
        past[2 * d :] = 0.5 * (req[d:-d] + req[: -2 * d])
        return _shift(np.log(req / past), t0, +1, FLOORS[cause])
    if cause == "SLOW_DEPENDENCY":
        # service time (p50 x (1 - CPU): queueing removed) over CPU per request
        req = _rows(SM["requests"], service, region)
        cpu = _rows(SAT["cpu_pct"], service, region)
        time = _rows(SM["latency_p50_ms"], service, region) * np.maximum(1 - cpu / 100, 0.005)
        service_time = (req * time).sum(axis=0) / np.maximum(req.sum(axis=0), 1)
        work = np.exp(np.log(cpu / np.maximum(req, 1)).mean(axis=0))
        return _shift(np.log(service_time / work), t0, +1, FLOORS[cause])
    req = np.maximum(_rows(SM["requests"], service, region), 1)
    if cause == "DB_REPLICA_SATURATION":
        # CPU the replica burns per query (steal is CPU a co-tenant took, not work)
        steal = _rows(SAT["cpu_steal_pct"], service, region)
        host = _rows(SAT["cpu_pct"], service, region) * np.maximum(1 - steal / 100, 0.01)
        return _shift(np.log(host / req).mean(axis=0), t0, +1, FLOORS[cause])
    if cause == "NOISY_NEIGHBOUR":
        # a co-tenant's steal, and the service slowed by it
        steal = _rows(SAT["cpu_steal_pct"], service, region).mean(axis=0)
        a = _shift(steal, t0, +1, FLOORS["steal"])
        per = _rows(SAT["cpu_pct"], service, region) / req
        b = _shift(np.log(per).mean(axis=0), t0, +1, FLOORS[cause])
        return min(a, b, key=lambda s: s["snr"])
    if cause == "CACHE_NODE_LOSS":
        hits = _rows(CACHE["hits"], service, region).sum(axis=0)
        rate = hits / np.maximum(_rows(CACHE["lookups"], service, region).sum(axis=0), 1)
        return _shift(rate, t0, -1, FLOORS[cause])
    if cause == "BAD_DEPLOY":
        err = _rows(SM["errors"], service, region).sum(axis=0)
        req = _rows(SM["requests"], service, region).sum(axis=0)
        a = _shift(np.log((err + 1) / np.maximum(req, 1)), t0, +1, FLOORS["error"])
        b = _shift(_rows(SAT["memory_pct"], service, region).mean(axis=0), t0, +1, FLOORS["memory"])
        return min(a, b, key=lambda s: s["snr"])
    if cause == "CONFIG_CHANGE":
        # requests wait for connections while fewer connections per request/s are in use
        pending = _rows(SAT["connections_pending"], service, region).sum(axis=0)
        active = _rows(SAT["connections_active"], service, region).sum(axis=0)
        rate = _rows(SM["requests"], service, region).sum(axis=0) / 900
        a = _shift(pending / np.maximum(pending + active, 1e-9), t0, +1, FLOORS[cause])
        held = np.log(np.maximum(active, 1e-3) / np.maximum(rate, 1e-3))
        b = _shift(held, t0, -1, FLOORS["held"])
        return min(a, b, key=lambda s: s["snr"])
    # backlog in seconds rising, and fewer live consumers (a slow orders_db stops none)
    rate = _rows(QUEUE["published"], service, region).sum(axis=0) / 900
    lag = _rows(QUEUE["depth"], service, region).sum(axis=0) / np.maximum(rate, 1e-3)
    a = _shift(np.log(lag + 1), t0, +1, FLOORS[cause])
    live = np.log(np.maximum(_rows(QUEUE["consumers"], service, region).sum(axis=0), 1e-2))
    b = _shift(live, t0, -1, FLOORS["consumers"], np.median)  # a rebalance is brief
    return min(a, b, key=lambda s: s["snr"])


def scan(onsets):
    """Each cause's strongest footprint over its candidate slices and the onsets given."""
    out = {}
    for cause in ["TRAFFIC_SURGE", *KINDS]:
        best = None
        for t0 in onsets:
            slices = [(None, None)]
            if cause != "TRAFFIC_SURGE":
                slices = [(s, r) for s in KINDS[cause] for r in REGIONS]
                if cause == "SLOW_DEPENDENCY":
                    slices += [(s, None) for s in KINDS[cause]]
            for service, region in slices:
                stat = footprint(cause, service, region, t0)
                if best is None or stat["z"] > best["z"]:
                    best = {**stat, "service": service, "region": region, "t0": t0}
        out[cause] = best
    return out


def by_region(cause, service, t0):
    """The cause's footprint on ``service`` in each region, from t0 on."""
    return {r: footprint(cause, service, r, t0) for r in REGIONS}
