"""The services SCM: panel (service x region x 15-minute bucket) and nodes."""

from __future__ import annotations

import numpy as np

from causaltrace import Constant, Dimension, Node, Panel, TimeAxis, Uniform
from causaltrace_domains.services import mechanisms as m
from causaltrace_domains.services.topology import (
    APP,
    BASE_RPS,
    CONSUMER_MS,
    CONSUMER_WRITES,
    CPU_MS,
    HIT_RATE,
    IO_MS,
    MEMORY_PCT,
    OWN_ERROR,
    PEAK_UTIL,
    POOL_HEADROOM,
    QUEUE,
    REGIONS,
    SERVICES,
    TAIL,
    call_matrix,
    nominal_peak_rates,
    per_service,
)


def build_panel(start: str, days: int) -> Panel:
    return Panel.cross(
        [Dimension("service", SERVICES), Dimension("region", REGIONS)],
        TimeAxis(start, int(days) * 96, "m", 15),
    )


NO_POOL = 1e9  # services without a connection pool (finite: interventions blend values)


def _cells(values: np.ndarray) -> np.ndarray:
    """(S, R) -> (n_cells, 1), service-major like the panel."""
    return np.asarray(values, dtype=np.float64).reshape(-1, 1)


def _by_service(values: dict[str, float]) -> np.ndarray:
    return _cells(np.repeat(per_service(values)[:, None], len(REGIONS), axis=1))


def nominal(consumer_headroom: float = 4.0):
    """Sizing at the daily peak with healthy caches: cores (S, R) for each service's target
    utilisation, connection pools (S, R) with headroom over peak in-flight requests (app
    services; unlimited elsewhere), and consumer workers per region."""
    peak = nominal_peak_rates()  # (S, R)
    cpu = per_service(CPU_MS)[:, None]
    cores = peak * cpu / (1000.0 * per_service(PEAK_UTIL)[:, None])
    rho = per_service(PEAK_UTIL)[:, None]
    own = np.broadcast_to((cpu + per_service(IO_MS)[:, None]) / (1.0 - rho), peak.shape)
    hit = np.zeros((len(SERVICES), len(REGIONS), 1))
    for c, h in HIT_RATE.items():
        hit[SERVICES.index(c)] = h
    k = call_matrix(hit)
    latency = m.inclusive_latency(
        own[..., None], k, peak[..., None], np.full((*peak.shape, 1), np.inf)
    )[..., 0]
    in_flight = peak * latency / 1000.0
    pool = np.full_like(peak, NO_POOL)
    for s in APP:
        i = SERVICES.index(s)
        pool[i] = np.maximum(np.ceil(POOL_HEADROOM * in_flight[i] / 4.0) * 4.0, 8.0)
    q, db = SERVICES.index(QUEUE), SERVICES.index("orders_db")
    per_message = CONSUMER_MS + CONSUMER_WRITES * latency[db]
    workers = np.ceil(consumer_headroom * peak[q] * per_message / 1000.0)
    return cores, pool, workers, latency


def build_nodes(panel: Panel) -> list[Node]:
    cores, pool, workers, _ = nominal()
    cpu_ms = _by_service(CPU_MS)
    hit0 = _by_service(HIT_RATE)
    u = Uniform()
    p50_ratio = np.full_like(cpu_ms, 0.78)
    return [
        Node(
            "demand",
            m.RegionalDemand(tuple(BASE_RPS[r] for r in REGIONS)),
            noise=u,
            observed=False,
            description="requests per second arriving at the region's frontend",
        ),
        Node("cache_health", Constant(1.0), observed=False, description="share of cache nodes up"),
        Node(
            "hit_rate",
            m.CacheHitRate(hit0),
            parents=("cache_health",),
            noise=u,
            observed=False,
            description="cache hit probability",
        ),
        Node(
            "request_rate",
            m.RequestRate(),
            parents=("demand", "hit_rate"),
            observed=False,
            description="expected requests per second along the call graph",
        ),
        Node("requests", m.BucketCount("request_rate"), ("request_rate",), u, dtype="int64"),
        Node("cpu_capacity", Constant(1.0), observed=False, description="CPU the service gets"),
        Node(
            "utilisation",
            m.Utilisation(cpu_ms, _cells(cores)),
            parents=("request_rate", "cpu_capacity"),
            observed=False,
        ),
        Node("cpu_pct", m.CpuPercent(), ("utilisation",), u),
        Node("io_ms", m.IoWait(_by_service(IO_MS)), noise=u, observed=False),
        Node("pool_limit", Constant(_cells(pool)), observed=False, description="connection pool"),
        Node(
            "latency_mean",
            m.ServiceLatency(cpu_ms),
            parents=(
                "utilisation",
                "cpu_capacity",
                "io_ms",
                "hit_rate",
                "request_rate",
                "pool_limit",
            ),
            observed=False,
        ),
        Node(
            "error_prob",
            m.OwnFailure(_by_service(OWN_ERROR)),
            noise=u,
            observed=False,
            description="probability a request fails in the service itself",
        ),
        Node(
            "error_rate",
            m.ErrorRate(),
            parents=(
                "error_prob",
                "utilisation",
                "request_rate",
                "latency_mean",
                "pool_limit",
                "hit_rate",
            ),
            observed=False,
        ),
        Node(
            "errors",
            m.BinomialCount("requests", "error_rate"),
            ("requests", "error_rate"),
            u,
            dtype="int64",
        ),
        Node("tail_factor", Constant(1.0), observed=False, description="p99 widening (GC, blips)"),
        Node("latency_p50_ms", m.LatencyQuantile(p50_ratio), ("latency_mean",), u),
        Node(
            "latency_p99_ms",
            m.LatencyQuantile(_by_service(TAIL), contention=1.5, sd=0.06, tail=True),
            ("latency_mean", "utilisation", "tail_factor"),
            u,
        ),
        Node("memory_extra", Constant(0.0), observed=False, description="extra memory (leaks)"),
        Node("memory_pct", m.MemoryPercent(_by_service(MEMORY_PCT)), ("memory_extra",), u),
        Node(
            "connections_active",
            m.ActiveConnections(),
            ("request_rate", "latency_mean", "pool_limit"),
            u,
        ),
        Node(
            "connections_pending",
            m.PendingConnections(),
            ("request_rate", "latency_mean", "pool_limit"),
        ),
        Node(
            "hits",
            m.BinomialCount("requests", "hit_rate"),
            ("requests", "hit_rate"),
            u,
            dtype="int64",
        ),
        Node("consumer_capacity", Constant(1.0), observed=False, description="consumer health"),
        Node(
            "queue_depth",
            m.QueueDepth(workers),
            ("request_rate", "latency_mean", "consumer_capacity"),
            u,
        ),
    ]


def pool_sizes() -> np.ndarray:
    """Nominal connection pools (S, R) (NO_POOL where a service has none)."""
    return nominal()[1]
