"""Mechanisms of the service system: pure, vectorized functions over the whole panel.

The panel is ``service x region`` (the full cross product, service-major), so every node value
reshapes to ``(n_services, n_regions, n_buckets)``; mechanisms that follow the call graph loop
over its eleven services (callers first for rates, callees first for latency and errors) and
are vectorized over regions and time. Each mechanism is a frozen dataclass holding per-cell
constants; every random draw comes from the node's own uniform noise (shared by the factual and
counterfactual worlds), so the worlds differ only where a cause moved a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from causaltrace import Panel
from causaltrace.model.distributions import binomial_icdf, normal_icdf, poisson_icdf
from causaltrace_domains.services.topology import (
    BUCKET_SECONDS,
    CONSUMER_MS,
    CONSUMER_WRITES,
    ERROR_PROPAGATION,
    QUEUE,
    REGIONS,
    SERVICES,
    TOPOLOGICAL,
    UTC_OFFSET,
    call_matrix,
    rates_from,
)

S, R = len(SERVICES), len(REGIONS)
IDX = {s: i for i, s in enumerate(SERVICES)}
RHO_CAP = 0.95  # queueing delay is bounded: beyond it requests are shed (overload errors)


def cube(values: np.ndarray) -> np.ndarray:
    """A ``(n_cells, T)`` panel array as ``(S, R, T)`` (service-major cells)."""
    return values.reshape(S, R, -1)


def flat(values: np.ndarray) -> np.ndarray:
    return values.reshape(S * R, -1)


def utc_hours(panel: Panel) -> np.ndarray:
    minutes = panel.time.values.astype("datetime64[m]").astype(np.int64)
    return (minutes % 1440) / 60.0


def diurnal(local_hour: np.ndarray, amplitude: float = 0.375) -> np.ndarray:
    """Traffic relative to the daily peak (15:00 local): 1.0 at the peak, 0.25 at 03:00."""
    return (1.0 - amplitude) + amplitude * np.cos(2 * np.pi * (local_hour - 15.0) / 24.0)


@dataclass(frozen=True, eq=False)
class RegionalDemand:
    """Requests per second arriving at each region's frontend (the same value in every cell of
    the region): a base rate x the diurnal curve in local time x a regional AR(1) shock."""

    base_rps: tuple[float, ...]  # per region
    phi: float = 0.7
    shock_sd: float = 0.025

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        hours = utc_hours(panel)
        offsets = np.array([UTC_OFFSET[r] for r in REGIONS], dtype=np.float64)
        curve = diurnal((hours[None, :] + offsets[:, None]) % 24.0)  # (R, T)
        z = normal_icdf(cube(noise)[IDX["frontend"]])  # one shock series per region
        shock = lfilter([1.0], [1.0, -self.phi], self.shock_sd * z, axis=1)
        region = np.asarray(self.base_rps)[:, None] * curve * np.exp(shock)
        return flat(np.broadcast_to(region[None], (S, R, panel.n_time)).copy())


@dataclass(frozen=True, eq=False)
class CacheHitRate:
    """A cache's hit probability: its base rate, cut when nodes are lost (keys re-hash to the
    remaining nodes and miss until refilled), plus a small per-bucket wobble. 0 elsewhere."""

    base: np.ndarray  # (n_cells, 1): 0 for cells that are not caches
    loss_slope: float = 0.85
    sd: float = 0.004

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        health = parents["cache_health"]
        hit = self.base * (1.0 - self.loss_slope * (1.0 - health)) + self.sd * normal_icdf(noise)
        return np.where(self.base > 0, np.clip(hit, 0.0, 0.995), 0.0)


def calls(parents) -> np.ndarray:
    """The call matrix (S, S, R, T) for the caches' hit rates and the traffic mix (the
    frontend's ``buy_share``)."""
    return call_matrix(cube(parents["hit_rate"]), cube(parents["buy_share"])[IDX["frontend"]])


@dataclass(frozen=True, eq=False)
class RequestRate:
    """Expected requests per second of every service: the frontend's demand, fanned out along
    the call graph (read-through edges carry only the caches' misses)."""

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        entry = cube(parents["demand"])[IDX["frontend"]]
        return flat(rates_from(entry, calls(parents)))


@dataclass(frozen=True, eq=False)
class BucketCount:
    """Requests counted in a bucket: Poisson with mean rate x bucket seconds."""

    rate: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return poisson_icdf(parents[self.rate] * BUCKET_SECONDS, noise)


def effective_capacity(parents) -> np.ndarray:
    """Share of its nominal CPU speed a service gets: its own capacity (a replica busy with
    other work has less for queries) times what co-tenants on its hosts leave it (1 - steal)."""
    return np.maximum(parents["cpu_capacity"] * (1.0 - parents["cpu_stolen"]), 0.05)


@dataclass(frozen=True, eq=False)
class Utilisation:
    """CPU utilisation (unbounded: above 1 the service is overloaded): rate x CPU ms per
    request at full speed / (capacity x cores x instances). ``cpu_capacity`` below 1 is CPU the
    service spends on other work (a replica running a vacuum), ``cpu_stolen`` CPU another
    tenant takes from its hosts; ``instances`` is the capacity provisioned for this week's
    traffic level (autoscaled), relative to nominal."""

    cpu_ms: np.ndarray  # (n_cells, 1)
    cores: np.ndarray  # (n_cells, 1)

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        capacity = effective_capacity(parents) * parents["instances"]
        return parents["request_rate"] * self.cpu_ms / (capacity * 1000.0 * self.cores)


@dataclass(frozen=True, eq=False)
class CpuPercent:
    """What the CPU gauge shows: utilisation in percent (it cannot exceed 100) plus jitter."""

    sd: float = 1.2

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        pct = 100.0 * np.minimum(parents["utilisation"], 0.99) + self.sd * normal_icdf(noise)
        return np.clip(pct, 0.5, 100.0)


@dataclass(frozen=True, eq=False)
class CpuSteal:
    """What the hypervisor reports as steal: the share of the hosts' CPU time other tenants
    took, in percent (a little at all times, jittering, plus whatever a noisy neighbour takes)."""

    base: float = 0.8
    sd: float = 0.5

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        idle = self.base * np.exp(self.sd * normal_icdf(noise))
        return np.clip(100.0 * parents["cpu_stolen"] + idle, 0.0, 100.0)


@dataclass(frozen=True, eq=False)
class IoWait:
    """Milliseconds a request waits on I/O or the network (no CPU of its own)."""

    base: np.ndarray  # (n_cells, 1)
    sd: float = 0.03

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return self.base * np.exp(self.sd * normal_icdf(noise))


def inclusive_latency(self_ms, k, rate, pool) -> np.ndarray:
    """Mean latency (S, R, T) including downstream calls, callees first; a service whose
    in-flight requests (Little's law) exceed its connection pool makes them wait."""
    latency = np.zeros_like(self_ms)
    for s in reversed(TOPOLOGICAL):
        i = IDX[s]
        total = self_ms[i] + np.einsum("crt,crt->rt", k[i], latency)
        in_flight = rate[i] * total / 1000.0
        over = np.maximum(in_flight / pool[i] - 1.0, 0.0)
        latency[i] = total * (1.0 + np.minimum(over, 6.0))
    return latency


@dataclass(frozen=True, eq=False)
class ServiceLatency:
    """Mean latency in ms: each service's own time ((CPU ms at its capacity + I/O wait) x the
    queueing factor 1 / (1 - utilisation)) plus its calls' latency, plus pool waits."""

    cpu_ms: np.ndarray  # (n_cells, 1)

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rho = np.minimum(parents["utilisation"], RHO_CAP)
        own = (self.cpu_ms / effective_capacity(parents) + parents["io_ms"]) / (1.0 - rho)
        k = calls(parents)
        return flat(
            inclusive_latency(
                cube(own), k, cube(parents["request_rate"]), cube(parents["pool_limit"])
            )
        )


def pool_pressure(rate, latency, pool) -> np.ndarray:
    """In-flight requests over the pool (Little's law), minus 1, floored at 0."""
    return np.maximum(rate * latency / 1000.0 / pool - 1.0, 0.0)


@dataclass(frozen=True, eq=False)
class OwnFailure:
    """Probability that a request fails in the service itself (bugs, crashes), before
    overload and dependencies: a base rate with a log-normal per-bucket wobble."""

    base: np.ndarray  # (n_cells, 1)
    sd: float = 0.25

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return np.clip(self.base * np.exp(self.sd * normal_icdf(noise) - 0.5 * self.sd**2), 0, 1)


@dataclass(frozen=True, eq=False)
class ErrorRate:
    """Share of a service's requests that fail: its own failures, load shedding above 85%
    CPU, connection-pool timeouts, and the failed calls to its dependencies it cannot absorb
    (callees first)."""

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rho = parents["utilisation"]
        shed = np.minimum(0.6 * np.maximum(rho - 0.85, 0.0), 0.5)
        pressure = pool_pressure(
            parents["request_rate"], parents["latency_mean"], parents["pool_limit"]
        )
        timeouts = np.minimum(0.03 * pressure, 0.15)
        own = cube(1.0 - (1.0 - parents["error_prob"]) * (1.0 - shed) * (1.0 - timeouts))
        k = calls(parents)
        rate = np.zeros_like(own)
        for s in reversed(TOPOLOGICAL):
            i = IDX[s]
            survive = np.prod((1.0 - ERROR_PROPAGATION * rate) ** k[i], axis=0)
            rate[i] = 1.0 - (1.0 - own[i]) * survive
        return flat(np.clip(rate, 0.0, 1.0))


@dataclass(frozen=True, eq=False)
class BinomialCount:
    """``trials`` thinned with probability ``rate`` (errors among requests, hits among
    lookups)."""

    trials: str
    rate: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return binomial_icdf(parents[self.trials], parents[self.rate], noise)


@dataclass(frozen=True, eq=False)
class LatencyQuantile:
    """A latency percentile in ms: the mean plus any wait to publish to the order queue, x the
    quantile's ratio to it (for p99, the service's tail ratio, widened by a tail factor and by
    CPU contention) x jitter."""

    ratio: np.ndarray  # (n_cells, 1)
    contention: float = 0.0  # extra tail per unit of utilisation above 0.7
    sd: float = 0.03
    tail: bool = False

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        mean = parents["latency_mean"] + parents["publish_wait_ms"]
        value = mean * self.ratio * np.exp(self.sd * normal_icdf(noise))
        if self.tail:
            rho = np.minimum(parents["utilisation"], 1.2)
            value = (
                value * parents["tail_factor"] * (1.0 + self.contention * np.maximum(rho - 0.7, 0))
            )
        return value


@dataclass(frozen=True, eq=False)
class MemoryPercent:
    """Memory in use: the service's usual level plus any extra (a leak) plus jitter."""

    base: np.ndarray  # (n_cells, 1)
    sd: float = 0.8

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        value = self.base + parents["memory_extra"] + self.sd * normal_icdf(noise)
        return np.clip(value, 1.0, 99.5)


@dataclass(frozen=True, eq=False)
class ActiveConnections:
    """Connections in use: in-flight requests (Little's law), at most the pool, x jitter."""

    sd: float = 0.03

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        in_flight = parents["request_rate"] * parents["latency_mean"] / 1000.0
        return np.minimum(in_flight, parents["pool_limit"]) * np.exp(self.sd * normal_icdf(noise))


@dataclass(frozen=True, eq=False)
class PendingConnections:
    """Requests waiting for a pooled connection: in-flight demand beyond the pool."""

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        in_flight = parents["request_rate"] * parents["latency_mean"] / 1000.0
        return np.maximum(in_flight - parents["pool_limit"], 0.0)


@dataclass(frozen=True, eq=False)
class PublishWait:
    """Milliseconds a publisher waits on the order queue per request: the broker's flow
    control throttles publishers once the backlog passes a memory watermark (``watermark``
    seconds of the region's peak publishes, scaled with its provisioned capacity), by
    ``ms_per_excess`` per watermark beyond it, at most ``cap``. Only checkout publishes, so
    only its cells carry the wait (which its latency quantiles show: the monitor's view); 0
    elsewhere. A backlog of any cause slows checkout once it is large enough."""

    peak_rate: np.ndarray  # (R,) nominal peak publishes per second
    watermark: float = 600.0
    ms_per_excess: float = 120.0
    cap: float = 1500.0

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        depth = cube(parents["queue_depth"])[IDX[QUEUE]]  # (R, T)
        scale = cube(parents["instances"])[IDX[QUEUE]]
        limit = self.watermark * self.peak_rate[:, None] * scale
        wait = np.minimum(self.ms_per_excess * np.maximum(depth / limit - 1.0, 0.0), self.cap)
        out = np.zeros((S, R, panel.n_time))
        out[IDX["checkout"]] = wait  # one publish per checkout request
        return flat(out)


@dataclass(frozen=True, eq=False)
class LiveConsumers:
    """Consumer workers of order_queue that processed messages in the bucket, on average, per
    region: the autoscaled workers less the stuck ones (``consumer_capacity``), with a little
    jitter (workers restarting). 0 elsewhere. A slow orders_db slows every worker but stops
    none, so this gauge tells stuck consumers from a slow database behind them."""

    workers: np.ndarray  # (R,)
    sd: float = 0.03

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        live = cube(parents["consumer_capacity"] * parents["instances"])[IDX[QUEUE]]
        z = normal_icdf(cube(noise)[IDX[QUEUE]])
        out = np.zeros((S, R, panel.n_time))
        out[IDX[QUEUE]] = self.workers[:, None] * live * np.exp(self.sd * z)
        return flat(out)


@dataclass(frozen=True, eq=False)
class QueueDepth:
    """Messages waiting in order_queue per region: the fulfilment consumer drains it at a rate
    set by its workers (scaled with the traffic level), their health and orders_db's latency
    (it writes every order there);
    the backlog follows the Lindley recursion, plus the messages in flight. 0 elsewhere."""

    workers: np.ndarray  # (R,) consumer workers per region
    sd: float = 0.05

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rate = cube(parents["request_rate"])[IDX[QUEUE]]  # publishes per second (R, T)
        db_ms = cube(parents["latency_mean"])[IDX["orders_db"]]
        # Consumer workers scale with the week's traffic level (``instances``), as instances do.
        health = cube(parents["consumer_capacity"] * parents["instances"])[IDX[QUEUE]]
        per_message = CONSUMER_MS + CONSUMER_WRITES * db_ms
        capacity = self.workers[:, None] * health * 1000.0 / per_message  # messages per second
        inflow = (rate - capacity) * BUCKET_SECONDS
        backlog = np.zeros_like(rate)
        level = np.zeros(rate.shape[0])
        for t in range(rate.shape[1]):
            level = np.maximum(level + inflow[:, t], 0.0)
            backlog[:, t] = level
        z = normal_icdf(cube(noise)[IDX[QUEUE]])
        # Consumers poll every 2 s: on average a second's publishes wait besides the backlog.
        depth = (backlog + rate * (1.0 + per_message / 1000.0)) * np.exp(self.sd * z)
        out = np.zeros((S, R, panel.n_time))
        out[IDX[QUEUE]] = depth
        return flat(out)
