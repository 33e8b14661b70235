"""The system under observation: services, regions, the call graph and per-service constants.

An online shop's backend, deployed identically in three regions. Requests enter at
``frontend`` and fan out through application services to caches, databases, a search
cluster, an external payment provider and an order queue. The call graph is the same in every
region (regions do not call each other). Every number here is a nominal value an SRE would
recognise: CPU milliseconds per request, I/O wait, connection pools, hit rates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

APP = ("frontend", "catalog", "cart", "checkout")
CACHES = ("product_cache", "session_cache")
DATABASES = ("catalog_db", "orders_db")
SERVICES = (*APP, *CACHES, *DATABASES, "search_index", "payments_api", "order_queue")
QUEUE = "order_queue"
# Dependencies whose slowness an SLO sees upstream (leaves of the call graph, no CPU of ours).
DEPENDENCIES = ("payments_api", "search_index", "catalog_db", "orders_db")
# Services on shared (multi-tenant) hosts, where another tenant can take CPU: ours and the
# managed databases and search cluster (not the caches' dedicated nodes, not the external API).
SHARED_HOSTS = (*APP, *DATABASES, "search_index")
REGIONS = ("us_east", "us_west", "eu_west")
UTC_OFFSET = {"us_east": -5, "us_west": -8, "eu_west": 0}
KIND = {
    **{s: "app" for s in APP},
    **{s: "cache" for s in CACHES},
    **{s: "database" for s in DATABASES},
    "search_index": "search",
    "payments_api": "external",
    "order_queue": "queue",
}

BUCKET_SECONDS = 900  # 15-minute buckets
BUCKETS_PER_DAY = 96


@dataclass(frozen=True)
class Edge:
    """``caller`` makes ``calls`` calls to ``callee`` per request; ``on_miss_of`` names a cache
    whose misses (not its lookups) the call is made on (a read-through cache)."""

    caller: str
    callee: str
    calls: float
    kind: str
    on_miss_of: str | None = None


EDGES = (
    Edge("frontend", "session_cache", 1.0, "cache lookup"),
    Edge("frontend", "orders_db", 2.0, "session rebuild on cache miss", "session_cache"),
    Edge("frontend", "catalog", 1.2, "http"),
    Edge("frontend", "cart", 0.4, "http"),
    Edge("frontend", "search_index", 0.3, "search query"),
    Edge("frontend", "checkout", 0.05, "http"),
    Edge("catalog", "product_cache", 2.0, "cache lookup"),
    Edge("catalog", "catalog_db", 0.5, "sql (inventory)"),
    Edge("catalog", "catalog_db", 2.0, "sql on cache miss", "product_cache"),
    Edge("cart", "product_cache", 1.0, "cache lookup"),
    Edge("cart", "orders_db", 0.1, "sql (writes; reads come with the session)"),
    Edge("checkout", "payments_api", 1.0, "https (external)"),
    Edge("checkout", "orders_db", 2.0, "sql"),
    Edge("checkout", "order_queue", 1.0, "publish"),
)
# Callers before callees (rates flow down); reversed, callees before callers (latency flows up).
TOPOLOGICAL = (
    "frontend",
    "catalog",
    "cart",
    "checkout",
    "session_cache",
    "product_cache",
    "search_index",
    "payments_api",
    "order_queue",
    "catalog_db",
    "orders_db",
)
# The fulfilment consumer drains order_queue and writes each order to orders_db.
CONSUMER_WRITES = 3.0  # orders_db calls per consumed message
CONSUMER_MS = 20.0  # its own time per message besides those writes

# Per service: CPU ms per request (at full speed), I/O wait ms, p99/mean tail ratio, memory %,
# base own failure probability, base cache hit rate, target peak CPU utilisation.
CPU_MS = {
    "frontend": 15.0,
    "catalog": 6.0,
    "cart": 5.0,
    "checkout": 30.0,  # pricing, fraud checks and the order's assembly: CPU-heavy
    "product_cache": 0.3,
    "session_cache": 0.2,
    "catalog_db": 2.0,
    "orders_db": 2.5,
    "search_index": 8.0,
    "payments_api": 0.5,
    "order_queue": 0.5,
}
IO_MS = {
    "frontend": 2.0,
    "catalog": 1.0,
    "cart": 1.0,
    "checkout": 2.0,
    "product_cache": 0.4,
    "session_cache": 0.4,
    "catalog_db": 3.0,
    "orders_db": 4.0,
    "search_index": 18.0,
    "payments_api": 120.0,
    "order_queue": 1.5,
}
TAIL = {
    "frontend": 4.5,
    "catalog": 3.5,
    "cart": 3.5,
    "checkout": 2.8,
    "product_cache": 3.0,
    "session_cache": 3.0,
    "catalog_db": 5.0,
    "orders_db": 5.0,
    "search_index": 4.0,
    "payments_api": 2.5,
    "order_queue": 3.0,
}
MEMORY_PCT = {
    "frontend": 52.0,
    "catalog": 48.0,
    "cart": 44.0,
    "checkout": 55.0,
    "product_cache": 71.0,
    "session_cache": 63.0,
    "catalog_db": 78.0,
    "orders_db": 81.0,
    "search_index": 66.0,
    "payments_api": 30.0,
    "order_queue": 40.0,
}
OWN_ERROR = {
    "frontend": 0.0008,
    "catalog": 0.0006,
    "cart": 0.0010,
    "checkout": 0.0015,
    "product_cache": 0.0001,
    "session_cache": 0.0001,
    "catalog_db": 0.0002,
    "orders_db": 0.0002,
    "search_index": 0.0010,
    "payments_api": 0.0030,
    "order_queue": 0.0001,
}
HIT_RATE = {"product_cache": 0.93, "session_cache": 0.92}
PEAK_UTIL = {
    "frontend": 0.55,
    "catalog": 0.45,
    "cart": 0.40,
    "checkout": 0.35,
    "product_cache": 0.30,
    "session_cache": 0.25,
    "catalog_db": 0.35,
    "orders_db": 0.40,
    "search_index": 0.45,
    "payments_api": 0.20,
    "order_queue": 0.25,
}
POOL_HEADROOM = 4.0  # app connection pools hold 4x the peak in-flight requests
ERROR_PROPAGATION = 0.6  # share of failed downstream calls that fail the caller's request
BASE_RPS = {"us_east": 420.0, "us_west": 260.0, "eu_west": 330.0}


def per_service(values: dict[str, float]) -> np.ndarray:
    """A per-service constant as an array in ``SERVICES`` order."""
    return np.array([values.get(s, 0.0) for s in SERVICES], dtype=np.float64)


def call_matrix(hit: np.ndarray, buy: np.ndarray | None = None) -> np.ndarray:
    """Calls per request from caller to callee, shape (S, S, R, T): ``[caller, callee]``,
    given each cache's hit rate ``hit`` (S, R, T) (read-through edges scale with misses) and
    the traffic mix ``buy`` (R, T): the frontend's checkout calls relative to nominal (a
    surge of buyers raises it, one of browsers lowers it; default 1)."""
    n = len(SERVICES)
    k = np.zeros((n, n, *hit.shape[1:]))
    idx = {s: i for i, s in enumerate(SERVICES)}
    for e in EDGES:
        factor = 1.0 if e.on_miss_of is None else 1.0 - hit[idx[e.on_miss_of]]
        if buy is not None and (e.caller, e.callee) == ("frontend", "checkout"):
            factor = factor * buy
        k[idx[e.caller], idx[e.callee]] += e.calls * factor
    return k


def rates_from(entry: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Requests per second of every service (S, R, T) from the frontend's (R, T)."""
    idx = {s: i for i, s in enumerate(SERVICES)}
    rate = np.zeros((len(SERVICES), *entry.shape))
    rate[idx["frontend"]] = entry
    for caller in TOPOLOGICAL:
        i = idx[caller]  # final: every caller of it came earlier in TOPOLOGICAL
        rate += k[i] * rate[i][None]
    # The consumer's writes follow the queue's publishes (steady state).
    rate[idx["orders_db"]] += CONSUMER_WRITES * rate[idx[QUEUE]]
    return rate


def nominal_peak_rates() -> np.ndarray:
    """Requests per second per service and region (S, R) at the daily peak, healthy caches."""
    hit = np.zeros((len(SERVICES), len(REGIONS), 1))
    for c, h in HIT_RATE.items():
        hit[SERVICES.index(c)] = h
    entry = np.array([BASE_RPS[r] for r in REGIONS])[:, None]
    return rates_from(entry, call_matrix(hit))[..., 0]
