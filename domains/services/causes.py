"""The root causes of the services domain, as intervention points of its SCM.

Each cause names the mechanism it intervenes on, the prior over its slice, strength, onset and
profile, and the causes it is most easily confused with (the verifier checks that their
signatures do not explain an accepted episode as well). See docs/domain-services.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from causaltrace import (
    InterventionDraw,
    InterventionPoint,
    InterventionPrior,
    Ramp,
    Scale,
    Shift,
    Step,
)
from causaltrace_domains.services.topology import APP, CACHES, DATABASES, DEPENDENCIES, QUEUE

GLOBAL = "global"
PROPAGATING = "propagating"
LOCALIZED = "localized"
NO_SIGNAL = "no-signal"
GROUPS = (GLOBAL, PROPAGATING, LOCALIZED, NO_SIGNAL)


@dataclass(frozen=True)
class CauseSpec:
    """What the domain declares about a cause besides its intervention."""

    name: str
    group: str
    description: str
    confusers: tuple[str, ...]
    change: str | None = None  # the change-log entry the cause itself makes, if any
    # Median detection SNR of accepted episodes (the unit of a difficulty tier's SNR band);
    # measured with `python -m causaltrace.episodes.difficulty` on a generated services split.
    typical_snr: float | None = None


CAUSES: dict[str, CauseSpec] = {
    c.name: c
    for c in (
        CauseSpec(
            "TRAFFIC_SURGE",
            GLOBAL,
            "more requests arrive at the frontend in every region than at this time on other "
            "days; every service downstream takes the extra load",
            ("NOISY_NEIGHBOUR", "DB_REPLICA_SATURATION", "CONFIG_CHANGE", "QUEUE_CONSUMER_STALL"),
            typical_snr=10.7,
        ),
        CauseSpec(
            "SLOW_DEPENDENCY",
            PROPAGATING,
            "a dependency (database, search cluster or payment provider) answers slowly "
            "without using more CPU; its callers' latency rises with it",
            ("DB_REPLICA_SATURATION", "CACHE_NODE_LOSS"),
            typical_snr=13.2,
        ),
        CauseSpec(
            "BAD_DEPLOY",
            LOCALIZED,
            "a new version of one service in one region fails requests and uses more memory",
            ("CONFIG_CHANGE", "NOISY_NEIGHBOUR"),
            change="deploy",
            typical_snr=6.1,
        ),
        CauseSpec(
            "DB_REPLICA_SATURATION",
            LOCALIZED,
            "a database replica in one region has less CPU for queries (a runaway query, "
            "vacuum, a lost replica): CPU per query and its latency rise",
            ("SLOW_DEPENDENCY", "CACHE_NODE_LOSS", "TRAFFIC_SURGE", "QUEUE_CONSUMER_STALL"),
            typical_snr=11.1,
        ),
        CauseSpec(
            "CACHE_NODE_LOSS",
            LOCALIZED,
            "a cache cluster in one region loses nodes: its hit rate falls and the misses load "
            "the database behind it",
            ("SLOW_DEPENDENCY", "DB_REPLICA_SATURATION", "QUEUE_CONSUMER_STALL"),
            typical_snr=38.5,
        ),
        CauseSpec(
            "CONFIG_CHANGE",
            LOCALIZED,
            "a config change shrank one service's connection pool in one region: requests "
            "queue for connections, slow down and time out",
            ("BAD_DEPLOY", "NOISY_NEIGHBOUR"),
            change="config",
            typical_snr=5.1,
        ),
        CauseSpec(
            "NOISY_NEIGHBOUR",
            LOCALIZED,
            "another tenant on the hosts of one service in one region takes CPU: the "
            "service's CPU per request and latency rise",
            ("TRAFFIC_SURGE", "BAD_DEPLOY", "CONFIG_CHANGE"),
            typical_snr=8.0,
        ),
        CauseSpec(
            "QUEUE_CONSUMER_STALL",
            LOCALIZED,
            "the consumers of the order queue in one region slow down (stuck workers): the "
            "queue backs up while the database behind them is healthy",
            ("SLOW_DEPENDENCY", "DB_REPLICA_SATURATION"),
            typical_snr=18.7,
        ),
        CauseSpec(
            "NO_ANOMALY",
            NO_SIGNAL,
            "no fault: the alert fired on noise, a short latency blip or a routine change",
            ("BAD_DEPLOY", "TRAFFIC_SURGE"),
        ),
    )
}

TWO_D = (("service", "region"),)


def _scale(node: str, direction: float):
    def build(draw: InterventionDraw):
        factor = 1.0 + direction * draw.strength
        return [Scale(node, where=draw.slice, window=draw.window, factor=factor)]

    return build


def _bad_deploy(draw: InterventionDraw):
    """More failures and a memory leak: two footprints of the same new version."""
    return [
        Scale("error_prob", where=draw.slice, window=draw.window, factor=1.0 + draw.strength),
        Shift(
            "memory_extra", where=draw.slice, window=draw.window, delta=6.0 + 0.8 * draw.strength
        ),
    ]


def _nothing(draw: InterventionDraw):
    return []


def intervention_points(onset: tuple[int, int]) -> list[InterventionPoint]:
    step_or_ramp = (Step(), Ramp(3))
    priors = {
        "TRAFFIC_SURGE": (
            _scale("demand", +1.0),
            InterventionPrior(strength=(0.5, 1.2), onset=onset, profiles=(Step(), Ramp(2))),
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
                strength=(6.0, 25.0),
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
                strength=(0.8, 0.95),
                onset=onset,
            ),
        ),
        "NOISY_NEIGHBOUR": (
            _scale("cpu_capacity", -1.0),
            InterventionPrior(
                slice_dims=TWO_D,
                allowed_levels={"service": APP},
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
                strength=(0.8, 0.97),
                onset=onset,
                profiles=step_or_ramp,
            ),
        ),
        "NO_ANOMALY": (_nothing, InterventionPrior(onset=onset)),
    }
    points = []
    for name, (build, prior) in priors.items():
        spec = CAUSES[name]
        points.append(
            InterventionPoint(
                name,
                build,
                prior,
                spec.description,
                {
                    "group": spec.group,
                    "confusers": spec.confusers,
                    "change": spec.change,
                    "no_signal": spec.group == NO_SIGNAL,
                    "typical_snr": spec.typical_snr,
                },
            )
        )
    return points
