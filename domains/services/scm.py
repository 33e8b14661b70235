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


def nominal(consumer_headroom: float = 2.0):
    """Sizing at the daily peak with healthy caches: cores (S, R) for each service's target
    utilisation, connection pools (S, R) with headroom over peak in-flight requests (app
    services; unlimited elsewhere), and consumer workers per region (an average of live
    workers, autoscaled: a fractional number). The consumers have twice the peak's work in
    capacity, so orders_db slowing down two- or threefold backs the queue up at the peak, as
    stalled consumers do."""
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
    workers = np.round(consumer_headroom * peak[q] * per_message / 1000.0, 2)
    return cores, pool, workers, latency


def build_nodes(panel: Panel, noise: float = 1.0) -> list[Node]:
    """The SCM's nodes. ``noise`` scales every per-bucket jitter (traffic shocks, I/O, failures,
    gauges, latency quantiles): a difficulty knob, 1 being the nominal system."""
    cores, pool, workers, _ = nominal()
    cpu_ms = _by_service(CPU_MS)
    hit0 = _by_service(HIT_RATE)
    u = Uniform()
    p50_ratio = np.full_like(cpu_ms, 0.78)
    k = float(noise)
    return [
        Node(
            "demand",
            m.RegionalDemand(tuple(BASE_RPS[r] for r in REGIONS), shock_sd=0.025 * k),
            noise=u,
            observed=False,
            description="requests per second arriving at the region's frontend",
        ),
        Node("cache_health", Constant(1.0), observed=False, description="share of cache nodes up"),
        Node(
            "hit_rate",
            m.CacheHitRate(hit0, sd=0.004 * k),
            parents=("cache_health",),
            noise=u,
            observed=False,
            description="cache hit probability",
        ),
        Node(
            "buy_share",
            Constant(1.0),
            observed=False,
            description="the frontend's checkout calls per request relative to nominal (mix)",
        ),
        Node(
            "request_rate",
            m.RequestRate(),
            parents=("demand", "hit_rate", "buy_share"),
            observed=False,
            description="expected requests per second along the call graph",
        ),
        Node("requests", m.BucketCount("request_rate"), ("request_rate",), u, dtype="int64"),
        Node(
            "cpu_capacity",
            Constant(1.0),
            observed=False,
            description="share of its CPU the service has for its requests (a replica busy "
            "with other work has less)",
        ),
        Node(
            "cpu_stolen",
            Constant(0.0),
            observed=False,
            description="share of the hosts' CPU other tenants take (a noisy neighbour)",
        ),
        Node(
            "instances",
            Constant(1.0),
            observed=False,
            description="capacity provisioned for the week's traffic level, relative to nominal",
        ),
        Node(
            "utilisation",
            m.Utilisation(cpu_ms, _cells(cores)),
            parents=("request_rate", "cpu_capacity", "cpu_stolen", "instances"),
            observed=False,
        ),
        Node("cpu_pct", m.CpuPercent(sd=1.2 * k), ("utilisation",), u),
        Node("cpu_steal_pct", m.CpuSteal(sd=0.5 * k), ("cpu_stolen",), u),
        Node("io_ms", m.IoWait(_by_service(IO_MS), sd=0.03 * k), noise=u, observed=False),
        Node("pool_limit", Constant(_cells(pool)), observed=False, description="connection pool"),
        Node(
            "latency_mean",
            m.ServiceLatency(cpu_ms),
            parents=(
                "utilisation",
                "cpu_capacity",
                "cpu_stolen",
                "io_ms",
                "hit_rate",
                "buy_share",
                "request_rate",
                "pool_limit",
            ),
            observed=False,
        ),
        Node(
            "error_prob",
            m.OwnFailure(_by_service(OWN_ERROR), sd=0.25 * k),
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
                "buy_share",
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
        Node(
            "latency_p50_ms",
            m.LatencyQuantile(p50_ratio, sd=0.03 * k),
            ("latency_mean", "publish_wait_ms"),
            u,
        ),
        Node(
            "latency_p99_ms",
            m.LatencyQuantile(_by_service(TAIL), contention=1.5, sd=0.06 * k, tail=True),
            ("latency_mean", "publish_wait_ms", "utilisation", "tail_factor"),
            u,
        ),
        Node("memory_extra", Constant(0.0), observed=False, description="extra memory (leaks)"),
        Node(
            "memory_pct", m.MemoryPercent(_by_service(MEMORY_PCT), sd=0.8 * k), ("memory_extra",), u
        ),
        Node(
            "connections_active",
            m.ActiveConnections(sd=0.03 * k),
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
            "publish_wait_ms",
            m.PublishWait(nominal_peak_rates()[SERVICES.index(QUEUE)]),
            ("queue_depth", "instances"),
            observed=False,
            description="checkout's wait on the broker's flow control when the queue backs up",
        ),
        Node(
            "consumers",
            m.LiveConsumers(workers, sd=0.03 * k),
            ("consumer_capacity", "instances"),
            u,
        ),
        Node(
            "queue_depth",
            m.QueueDepth(workers, sd=0.05 * k),
            ("request_rate", "latency_mean", "consumer_capacity", "instances"),
            u,
        ),
    ]


def pool_sizes() -> np.ndarray:
    """Nominal connection pools (S, R) (NO_POOL where a service has none)."""
    return nominal()[1]
