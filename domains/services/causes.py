"""The root causes of the services domain, as intervention points of its SCM.

Each cause names the mechanism it intervenes on, the prior over its slice, strength, onset and
profile, and the causes it is most easily confused with (the verifier checks that their
signatures do not explain an accepted episode as well). See docs/domain-services.md.
"""

from __future__ import annotations

import math

import numpy as np

from causaltrace import (
    CauseInfo,
    InterventionDraw,
    InterventionPoint,
    InterventionPrior,
    Ramp,
    Scale,
    Shift,
    Step,
)
from causaltrace_domains.services.topology import (
    APP,
    CACHES,
    DATABASES,
    DEPENDENCIES,
    QUEUE,
    REGIONS,
    SERVICES,
    SHARED_HOSTS,
)

GLOBAL = "global"
PROPAGATING = "propagating"
LOCALIZED = "localized"
NO_SIGNAL = "no-signal"
GROUPS = (GLOBAL, PROPAGATING, LOCALIZED, NO_SIGNAL)


# What the domain declares about each cause besides its intervention (the engine's CauseInfo):
# its group, the causes it is most easily confused with and, in ``extra``, the change-log entry
# the cause itself makes (``change``), if any. typical_snr is the median detection SNR of
# accepted episodes (the unit of a difficulty tier's SNR band); measured with `python -m
# causaltrace.episodes.difficulty` on a 396-episode split at the default difficulty
# (docs/domain-services.md, measured numbers).
CAUSES: dict[str, CauseInfo] = {
    "TRAFFIC_SURGE": CauseInfo(
        GLOBAL,
        confusers=(
            "NOISY_NEIGHBOUR",
            "DB_REPLICA_SATURATION",
            "CONFIG_CHANGE",
            "QUEUE_CONSUMER_STALL",
        ),
        typical_snr=6.9,
    ),
    "SLOW_DEPENDENCY": CauseInfo(
        PROPAGATING,
        confusers=("DB_REPLICA_SATURATION", "NOISY_NEIGHBOUR", "CACHE_NODE_LOSS"),
        typical_snr=13.0,
    ),
    "BAD_DEPLOY": CauseInfo(
        LOCALIZED,
        confusers=("CONFIG_CHANGE", "NOISY_NEIGHBOUR"),
        typical_snr=5.8,
        extra={"change": "deploy"},
    ),
    "DB_REPLICA_SATURATION": CauseInfo(
        LOCALIZED,
        confusers=(
            "SLOW_DEPENDENCY",
            "NOISY_NEIGHBOUR",
            "CACHE_NODE_LOSS",
            "TRAFFIC_SURGE",
            "QUEUE_CONSUMER_STALL",
        ),
        typical_snr=11.1,
    ),
    "CACHE_NODE_LOSS": CauseInfo(
        LOCALIZED,
        confusers=("SLOW_DEPENDENCY", "DB_REPLICA_SATURATION", "QUEUE_CONSUMER_STALL"),
        typical_snr=34.6,
    ),
    "CONFIG_CHANGE": CauseInfo(
        LOCALIZED,
        confusers=("BAD_DEPLOY", "NOISY_NEIGHBOUR"),
        typical_snr=6.1,
        extra={"change": "config"},
    ),
    "NOISY_NEIGHBOUR": CauseInfo(
        LOCALIZED,
        confusers=(
            "SLOW_DEPENDENCY",
            "DB_REPLICA_SATURATION",
            "TRAFFIC_SURGE",
            "BAD_DEPLOY",
            "CONFIG_CHANGE",
        ),
        typical_snr=8.6,
    ),
    "QUEUE_CONSUMER_STALL": CauseInfo(
        LOCALIZED, confusers=("SLOW_DEPENDENCY", "DB_REPLICA_SATURATION"), typical_snr=11.1
    ),
    "NO_ANOMALY": CauseInfo(NO_SIGNAL, confusers=("BAD_DEPLOY", "TRAFFIC_SURGE"), no_signal=True),
}

# What the prompt says each cause is (in this order).
DESCRIPTIONS: dict[str, str] = {
    "TRAFFIC_SURGE": (
        "more requests arrive at the frontend in every region (most in one) than at this time on "
        "other days (more buyers or more browsers than usual); the services downstream take the "
        "extra load"
    ),
    "SLOW_DEPENDENCY": (
        "a dependency (database, search cluster or payment provider) answers slowly without using "
        "more CPU; its callers' latency rises with it"
    ),
    "BAD_DEPLOY": "a new version of one service in one region fails requests and uses more memory",
    "DB_REPLICA_SATURATION": (
        "a database replica in one region has less CPU for queries (a runaway query, vacuum, a "
        "lost replica): CPU per query and its latency rise"
    ),
    "CACHE_NODE_LOSS": (
        "a cache cluster in one region loses nodes: its hit rate falls and the misses load the "
        "database behind it"
    ),
    "CONFIG_CHANGE": (
        "a config change shrank one service's connection pool in one region: requests queue for "
        "connections, slow down and time out"
    ),
    "NOISY_NEIGHBOUR": (
        "another tenant on the shared hosts of one service in one region (ours, a database or the "
        "search cluster) takes CPU: the service slows down, and its callers with it"
    ),
    "QUEUE_CONSUMER_STALL": (
        "the consumers of the order queue in one region slow down (stuck workers): the queue "
        "backs up while the database behind them is healthy"
    ),
    "NO_ANOMALY": "no fault: the alert fired on noise, a short latency blip or a routine change",
}


def cause_change(cause: str) -> str | None:
    """The kind of change-log entry ``cause`` itself makes (None: the cause is no change)."""
    return CAUSES[cause].extra.get("change")


TWO_D = (("service", "region"),)


def _scale(node: str, direction: float):
    def build(draw: InterventionDraw):
        factor = 1.0 + direction * draw.strength
        return [Scale(node, where=draw.slice, window=draw.window, factor=factor)]

    return build


def _bad_deploy(draw: InterventionDraw):
    """More failures (from a few times the usual rate to a crash loop failing a tenth of the
    requests) and a memory leak: two footprints of the same new version."""
    leak = 4.0 + 4.0 * math.log(draw.strength)
    return [
        Scale("error_prob", where=draw.slice, window=draw.window, factor=1.0 + draw.strength),
        Shift("memory_extra", where=draw.slice, window=draw.window, delta=leak),
    ]


def _surge(draw: InterventionDraw):
    """More requests in every region, most in one (a campaign, a mention, a sale that lands in
    one market first: each region's share of the surge is drawn), with the mix of the new
    traffic drawn too: buyers (more checkouts per request: the order queue and orders_db take
    it) or browsers (fewer: the catalog and search take it)."""
    mix = float(draw.extras["buy_mix"])
    weights = np.asarray(draw.extras["region_weights"], dtype=np.float64)
    factor = np.tile(1.0 + draw.strength * weights, len(SERVICES))[:, None]  # service-major
    return [
        Scale("demand", where=draw.slice, window=draw.window, factor=factor),
        Scale("buy_share", where=draw.slice, window=draw.window, factor=mix),
    ]


def _surge_extras(rng, panel, sl) -> dict:
    """The surge's checkout calls per request relative to nominal (log-uniform 0.5-1.6), and
    each region's share of it: 1 in one region, 0.3-0.9 in the others."""
    mix = float(np.exp(rng.uniform(np.log(0.5), np.log(1.6))))
    weights = rng.uniform(0.3, 0.9, size=len(REGIONS))
    weights[int(rng.integers(len(REGIONS)))] = 1.0
    return {"buy_mix": mix, "region_weights": [round(float(w), 4) for w in weights]}


def _noisy_neighbour(draw: InterventionDraw):
    """The co-tenant takes a share of the hosts' CPU (the hypervisor reports it as steal)."""
    return [Shift("cpu_stolen", where=draw.slice, window=draw.window, delta=draw.strength)]


def _nothing(draw: InterventionDraw):
    return []


def intervention_points(onset: tuple[int, int]) -> list[InterventionPoint]:
    step_or_ramp = (Step(), Ramp(3))
    priors = {
        "TRAFFIC_SURGE": (
            _surge,
            InterventionPrior(
                strength=(0.3, 0.9), onset=onset, profiles=(Step(), Ramp(2)), extras=_surge_extras
            ),
        ),
        "SLOW_DEPENDENCY": (
            _scale("io_ms", +1.0),
            InterventionPrior(
                slice_dims=(("service",), ("service", "region")),
                slice_dim_weights=(0.4, 0.6),
                allowed_levels={"service": DEPENDENCIES},
                strength=(2.0, 6.0),
                onset=onset,
                profiles=step_or_ramp,
            ),
        ),
        "BAD_DEPLOY": (
            _bad_deploy,
            InterventionPrior(
                slice_dims=TWO_D,
                allowed_levels={"service": APP},
                strength=(5.0, 200.0),
                log_strength=True,
                onset=onset,
                profiles=(Ramp(3), Step()),  # a rolling deploy or all pods at once
            ),
        ),
        "DB_REPLICA_SATURATION": (
            _scale("cpu_capacity", -1.0),
            InterventionPrior(
                slice_dims=TWO_D,
                allowed_levels={"service": DATABASES},
                strength=(0.4, 0.75),
                onset=onset,
                profiles=step_or_ramp,
            ),
        ),
        "CACHE_NODE_LOSS": (
            _scale("cache_health", -1.0),
            InterventionPrior(
                slice_dims=TWO_D,
                allowed_levels={"service": CACHES},
                strength=(0.3, 0.6),
                onset=onset,
            ),
        ),
        "CONFIG_CHANGE": (
            _scale("pool_limit", -1.0),
            InterventionPrior(
                slice_dims=TWO_D,
                allowed_levels={"service": APP},
                strength=(0.7, 0.93),
                onset=onset,
            ),
        ),
        "NOISY_NEIGHBOUR": (
            _noisy_neighbour,
            InterventionPrior(
                slice_dims=TWO_D,
                allowed_levels={"service": SHARED_HOSTS},
                strength=(0.35, 0.65),
                onset=onset,
                profiles=step_or_ramp,
            ),
        ),
        "QUEUE_CONSUMER_STALL": (
            _scale("consumer_capacity", -1.0),
            InterventionPrior(
                slice_dims=TWO_D,
                allowed_levels={"service": (QUEUE,)},
                strength=(0.45, 0.85),
                onset=onset,
                profiles=step_or_ramp,
            ),
        ),
        "NO_ANOMALY": (_nothing, InterventionPrior(onset=onset)),
    }
    return [
        InterventionPoint(name, build, prior, DESCRIPTIONS[name], CAUSES[name])
        for name, (build, prior) in priors.items()
    ]
