"""What happens in a services episode whatever its cause, in the factual and the counterfactual
world alike.

- **The week's traffic level**, per region (log-uniform over ``traffic_level``): demand is
  scaled by it and so is the provisioned capacity (instances and queue consumers autoscale), so
  CPU and latency stay nominal while the number of requests in flight moves with it.
- **Configured connection pools**, per application service and region (log-uniform headroom
  over the peak in-flight requests): pools are set by hand and do not follow traffic, so how
  close a pool is to binding differs from cell to cell and week to week, and a pool size in the
  change log says nothing by itself about whether it binds: only the connections in use do.
- **Blips** (0, 1, 2, ... with the weights ``blips``) near the end: a p99 widening (a GC
  storm, a slow node being drained) or a burst of errors (a bad node before the load balancer
  drains it) on one application service in one region for 30 to 90 minutes, or a consumer-group
  rebalance that pauses most of the order queue's consumers in one region for 15 to 30 minutes
  (the backlog it leaves drains within the hour). No cause's signature reads p99 alone, errors
  without memory, or consumers missing for less than half the time after an onset, so blips
  raise alerts (false alarms, extra lines on a page) without looking like a cause.
- **Harmless changes** scattered over the panel (:func:`changes.scattered_slots`).
"""

from __future__ import annotations

import numpy as np

from causaltrace import Background, BackgroundChange, Panel, Pulse, Scale, Slice, Window
from causaltrace_domains.services.changes import scattered_slots
from causaltrace_domains.services.config import ServicesConfig
from causaltrace_domains.services.scm import nominal
from causaltrace_domains.services.topology import (
    APP,
    QUEUE,
    REGIONS,
    SERVICES,
    nominal_peak_rates,
)


def _nominal_pools() -> tuple[np.ndarray, np.ndarray]:
    """Nominal pools (S, R) and peak in-flight requests (S, R) (Little's law at the peak)."""
    _, pool, _, latency = nominal()
    return pool, nominal_peak_rates() * latency / 1000.0


NOMINAL_POOL, PEAK_IN_FLIGHT = _nominal_pools()


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float], size) -> np.ndarray:
    low, high = bounds
    return np.exp(rng.uniform(np.log(low), np.log(high), size=size))


def traffic_level(rng: np.random.Generator, cfg: ServicesConfig) -> np.ndarray:
    """Per-cell factor (n_cells, 1): each region's traffic level, the same in its services."""
    level = _log_uniform(rng, cfg.traffic_level, len(REGIONS))
    return np.tile(level, len(SERVICES))[:, None]


def pool_factor(rng: np.random.Generator, cfg: ServicesConfig) -> np.ndarray:
    """Per-cell factor (n_cells, 1) taking each nominal pool to its configured size: a headroom
    over the cell's peak in-flight requests, rounded up to a multiple of 4 (1 where a service
    has no pool)."""
    headroom = _log_uniform(rng, cfg.pool_headroom, NOMINAL_POOL.shape)
    configured = np.maximum(np.ceil(headroom * PEAK_IN_FLIGHT / 4.0) * 4.0, 4.0)
    has_pool = np.isin(SERVICES, APP)[:, None]
    return np.where(has_pool, configured / NOMINAL_POOL, 1.0).reshape(-1, 1)


def blip(n_time: int, rng: np.random.Generator) -> Scale:
    """A p99 blip (tail x 1.5-2.5) or an error burst (own failures x 4-15) on one application
    cell, starting in the last two hours and lasting 2-6 buckets; or (one time in four) a
    rebalance: the order queue's consumers in one region at 2-30% for 1-2 buckets."""
    region = REGIONS[int(rng.integers(len(REGIONS)))]
    onset = int(rng.integers(n_time - 8, n_time - 1))
    kind = rng.random()
    if kind < 0.25:
        window = Window(onset=onset, profile=Pulse(int(rng.integers(1, 3))))
        where = Slice.of(service=QUEUE, region=region)
        return Scale(
            "consumer_capacity", where=where, window=window, factor=float(rng.uniform(0.02, 0.3))
        )
    where = Slice.of(service=APP[int(rng.integers(len(APP)))], region=region)
    window = Window(onset=onset, profile=Pulse(int(rng.integers(2, 7))))
    if kind < 0.625:
        return Scale("tail_factor", where=where, window=window, factor=float(rng.uniform(1.5, 2.5)))
    return Scale("error_prob", where=where, window=window, factor=float(rng.uniform(4.0, 15.0)))


def sample_background(panel: Panel, cfg: ServicesConfig, rng: np.random.Generator) -> Background:
    """The episode's background (see the module docstring); every draw from ``rng``."""
    n = panel.n_time
    level = traffic_level(rng, cfg)
    interventions = [
        Scale("demand", window=Window(0), factor=level),
        Scale("instances", window=Window(0), factor=level),
        Scale("pool_limit", window=Window(0), factor=pool_factor(rng, cfg)),
    ]
    weights = np.asarray(cfg.blips) / sum(cfg.blips)
    blips = [blip(n, rng) for _ in range(int(rng.choice(len(weights), p=weights)))]
    count = int(rng.integers(cfg.decoy_changes[0], cfg.decoy_changes[1] + 1))
    slots = scattered_slots(n, count, cfg.recent_share, rng)
    # The level and the pools are the week's setting; each blip is a change of its own that the
    # label's attribution switches on and off. No cause looks like a blip (not nameable): a
    # blip may raise a NO_ANOMALY page, never more than a tenth of a signal episode's.
    changes = tuple(
        BackgroundChange(
            f"blip#{i + 1}", f"blip:{iv.node}", (iv,), _describe(panel, iv), nameable=False
        )
        for i, iv in enumerate(blips)
    )
    return Background(
        (*interventions, *blips),
        {"changes": slots, "level": level[: len(REGIONS), 0]},
        changes,
    )


def _describe(panel: Panel, iv: Scale) -> str:
    where = iv.where.canonical() or "everywhere"
    return f"{iv.node} x{float(iv.factor):.2f} on {where} from {panel.time.values[iv.window.onset]}"
