"""How much of each alert the prompt shows every cause of an episode made.

The explained-alert gate (:func:`~causaltrace.episodes.verify.verify_alert`) reads the first
alert against the counterfactual world without any cause. A concurrent episode needs more: each
of its causes must be part of the incident, so that an answer is never rewarded for naming a
fault that could not have moved what the page shows. A cause's part of an alert is its Shapley
share of the alert's move over the episode's causes: the average, over the orders in which the
causes could be added to the counterfactual world, of the move it adds, divided by the move the
factual world shows. Every world is simulated with the episode's own noise and background, so
the shares sum to the causes' joint share and differ from it only where the causes interact
(for one cause, the share is the explained share itself and no world is simulated again).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import TYPE_CHECKING

from causaltrace.core.seeds import episode_streams
from causaltrace.episodes.alerts import AlertReading
from causaltrace.episodes.domain import Domain, domain_has_monitor

if TYPE_CHECKING:  # pragma: no cover
    from causaltrace.episodes.sampling import Episode


def alert_key(reading: AlertReading) -> str:
    """How a share names its alert in a label: ``kpi@scope``.

    Args:
        reading: The alert's reading.
    """
    return f"{reading.kpi}@{reading.scope}"


def _moves(domain: Domain, world, keys: Sequence[tuple[str, str]]) -> list[float]:
    readings = {r.key: r for r in domain.alert_readings(domain.monitor_tables(world))}
    return [readings[k].move for k in keys]


def shown_alerts_of(domain: Domain, episode: Episode) -> list[AlertReading] | None:
    """The alerts ``episode``'s prompt shows (the paged one first); None if the domain has no
    monitor or its tables raise none.

    Args:
        domain: The domain (its monitor).
        episode: The generated episode (its tables).
    """
    if not domain_has_monitor(domain):
        return None
    return domain.shown_alerts(domain.alert_readings(episode.tables)) or None


def cause_alert_shares(domain: Domain, episode: Episode) -> dict[str, dict[str, float]] | None:
    """cause -> {``kpi@scope`` of each shown alert -> the cause's Shapley share of its move};
    None if the domain has no monitor or the tables raise no alert.

    Args:
        domain: The domain (its monitor).
        episode: The generated episode (its tables, draws and worlds).
    """
    shown = shown_alerts_of(domain, episode)
    if shown is None:
        return None
    keys = [a.key for a in shown]
    factual = [a.move for a in shown]
    draws = episode.draws
    causes = [d.point for d in draws]
    # The move of each alert in the world with each subset of the causes (the empty set is the
    # counterfactual world, the full set the factual one).
    moves: dict[frozenset[int], list[float]] = {
        frozenset(): _moves(domain, episode.worlds.counterfactual, keys),
        frozenset(range(len(draws))): factual,
    }
    if len(draws) > 1:
        scm = domain.scm
        spec = episode.spec
        noise = episode_streams(spec.dataset_seed, spec.split, spec.index, spec.attempt).noise
        base = (
            scm.intervene(episode.background.interventions)
            if episode.background.interventions
            else scm
        )
        for size in range(1, len(draws)):
            for subset in combinations(range(len(draws)), size):
                interventions = tuple(iv for i in subset for iv in scm.interventions_for(draws[i]))
                world = base.simulate(interventions, seed=noise, counterfactual=False).factual
                moves[frozenset(subset)] = _moves(domain, world, keys)
    n = len(draws)
    out: dict[str, dict[str, float]] = {}
    for i, cause in enumerate(causes):
        others = [j for j in range(n) if j != i]
        shares = {}
        for a, reading in enumerate(shown):
            value = 0.0
            for size in range(n):
                weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
                for subset in combinations(others, size):
                    without = frozenset(subset)
                    value += weight * (moves[without | {i}][a] - moves[without][a])
            total = factual[a]
            shares[alert_key(reading)] = value / total + 0.0 if total != 0 else 0.0
        out[cause] = shares
    return out


def weakest_cause(shares: Mapping[str, Mapping[str, float]]) -> tuple[str, float]:
    """The cause whose best share of any shown alert is the smallest, and that share.

    Args:
        shares: What :func:`cause_alert_shares` returns (not empty).
    """
    best = {cause: max(per_alert.values(), default=0.0) for cause, per_alert in shares.items()}
    cause = min(best, key=best.get)
    return cause, best[cause]
