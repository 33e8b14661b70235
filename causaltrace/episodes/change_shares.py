"""How much of each shown alert every change of an episode made: its causes *and* its background.

The label is the reward, so it must hold every change that moved what the page shows. A
background change (a budget edit that is a cause's twin, a learning period, a promotion) is
applied to the factual and the counterfactual world alike, so "factual minus counterfactual"
never sees its share of the alert: the alert compares the account with its own past, and the
change is part of that move. Here each change is a player of a cooperative game whose value is
the alert's move as the monitor reads it (current window against baseline), in the world where
exactly the coalition's changes are on; the account's setting (its state from the first day)
and the episode's noise are shared by every world. A player's share of an alert is its Shapley
value divided by the factual move, so the shares of all changes and the move left when none
is on (``natural``: seasonality, noise) sum to 1.

Two estimators, both deterministic:

- ``exact``: every coalition simulated (``2^n - 2`` worlds beyond the factual one), for
  ``n <= exact_players``;
- ``pairwise``: each player's marginal move at the bottom of the lattice (added to no change)
  and at the top (removed from all), averaged: ``(v({i}) - v({})) / 2 + (v(N) - v(N - i)) / 2``,
  ``2n`` worlds. In the Harsanyi decomposition of the game (dividends ``d_T``), this is
  ``sum_T d_T (1/2 + [|T| = 1] / 2)`` over ``T`` holding ``i``, while the Shapley value is
  ``sum_T d_T / |T|``: the two agree exactly when no three changes interact (``d_T = 0`` for
  ``|T| >= 3``), whatever the pairwise interactions (a budget twin that binds only with the
  cause's cut is one). The estimate's efficiency residual, ``v(N) - v({}) - sum_i phi_i``,
  equals ``sum_{|T| >= 3} d_T (1 - |T| / 2)``: zero when no three changes interact, and the
  measure of how much higher-order interaction there is. It is recorded per alert; where it
  exceeds ``residual_tolerance`` of the move, the caller knows the shares are not exact (the
  generator rejects such an attempt rather than trust them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any

from causaltrace.core.seeds import episode_streams
from causaltrace.episodes.alert_shares import alert_key, shown_alerts_of
from causaltrace.episodes.domain import Domain

if TYPE_CHECKING:  # pragma: no cover
    from causaltrace.episodes.sampling import Episode

Coalition = frozenset[int]
Game = Callable[[Coalition], Sequence[float]]


@dataclass(frozen=True)
class ChangeAttribution:
    """Every change's share of every shown alert.

    ``causes`` and ``background`` map a player's name to ``{kpi@scope: share}`` (a cause by its
    cause name, a background change by its :class:`~causaltrace.episodes.domain.BackgroundChange`
    name); ``kinds`` gives a background change's kind and ``descriptions`` where it acted.
    ``natural`` is the share of each alert's move left with no change on; ``residual`` the
    estimate's efficiency residual as a share of the move (0 for ``exact``).
    """

    alerts: tuple[str, ...]
    causes: Mapping[str, Mapping[str, float]]
    background: Mapping[str, Mapping[str, float]]
    kinds: Mapping[str, str] = field(default_factory=dict)
    descriptions: Mapping[str, str] = field(default_factory=dict)
    nameable: Mapping[str, bool] = field(default_factory=dict)
    natural: Mapping[str, float] = field(default_factory=dict)
    residual: Mapping[str, float] = field(default_factory=dict)
    method: str = "exact"
    worlds: int = 0

    def largest_background(self) -> tuple[str, str, float] | None:
        """The background change with the largest absolute share of any shown alert: (change,
        alert, share); None without background changes."""
        best = None
        for name, per_alert in self.background.items():
            for alert, share in per_alert.items():
                if best is None or abs(share) > abs(best[2]):
                    best = (name, alert, share)
        return best

    def to_dict(self) -> dict[str, Any]:
        """The label's record (``extra["change_shares"]``): the shown alerts (the paged one
        first), the causes' and the background's shares (each background change with its kind
        and description), the natural move, the residual and the method."""
        return {
            "alerts": list(self.alerts),
            "method": self.method,
            "worlds": self.worlds,
            "causes": {name: dict(shares) for name, shares in self.causes.items()},
            "natural": dict(self.natural),
            "residual": dict(self.residual),
            "background": {
                name: {
                    "kind": self.kinds.get(name, ""),
                    "where": self.descriptions.get(name, ""),
                    "nameable": self.nameable.get(name, True),
                    "shares": dict(shares),
                }
                for name, shares in self.background.items()
            },
        }


def shapley_exact(game: Game, n: int, alerts: int) -> list[list[float]]:
    """Shapley values of ``n`` players for each of ``alerts`` outcomes, every coalition played.

    Args:
        game: Coalition -> the outcome of each alert.
        n: Number of players.
        alerts: Number of outcomes per coalition.
    """
    values = [[0.0] * alerts for _ in range(n)]
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for subset in combinations(others, size):
                without = frozenset(subset)
                with_i, base = game(without | {i}), game(without)
                for a in range(alerts):
                    values[i][a] += weight * (with_i[a] - base[a])
    return values


def shapley_pairwise(game: Game, n: int, alerts: int) -> list[list[float]]:
    """The mean of each player's bottom and top marginal: the Shapley value of any game whose
    interactions are at most pairwise (see the module docstring).

    Args:
        game: Coalition -> the outcome of each alert.
        n: Number of players.
        alerts: Number of outcomes per coalition.
    """
    empty, full = frozenset(), frozenset(range(n))
    v0, vn = game(empty), game(full)
    out = []
    for i in range(n):
        alone, rest = game(frozenset({i})), game(full - {i})
        out.append([0.5 * (alone[a] - v0[a]) + 0.5 * (vn[a] - rest[a]) for a in range(alerts)])
    return out


class _CachedGame:
    """A game played at most once per coalition; counts the coalitions it had to play."""

    def __init__(self, play: Game, known: Mapping[Coalition, Sequence[float]]):
        self._play = play
        self._moves: dict[Coalition, Sequence[float]] = dict(known)
        self.played = 0

    def __call__(self, coalition: Coalition) -> Sequence[float]:
        if coalition not in self._moves:
            self._moves[coalition] = self._play(coalition)
            self.played += 1
        return self._moves[coalition]


def attribute_changes(
    domain: Domain,
    episode: Episode,
    *,
    exact_players: int = 4,
) -> ChangeAttribution | None:
    """Every change's Shapley share of every alert the prompt shows (see the module docstring);
    None if the domain has no monitor or the tables raise no alert.

    The players are the episode's causes and its background's
    :attr:`~causaltrace.episodes.domain.Background.changes` that carry an intervention (a change
    with none cannot move anything and gets no share). The factual world (every player on) and,
    for a single cause, the counterfactual (every change but the cause) are the episode's own
    worlds; the others are simulated with the episode's noise.

    Args:
        domain: The domain (its SCM and monitor).
        episode: The generated episode (its tables, draws, background and worlds).
        exact_players: Up to this many players every coalition is simulated; beyond it the
            pairwise estimator is used.
    """
    shown = shown_alerts_of(domain, episode)
    if shown is None:
        return None
    keys = [a.key for a in shown]
    names = [alert_key(a) for a in shown]
    draws = episode.draws
    background = episode.background
    changes = [c for c in background.changes if c.interventions]
    n_causes, n = len(draws), len(draws) + len(changes)
    scm = domain.scm
    spec = episode.spec
    noise = episode_streams(spec.dataset_seed, spec.split, spec.index, spec.attempt).noise

    def moves(world) -> list[float]:
        readings = {r.key: r for r in domain.alert_readings(domain.monitor_tables(world))}
        return [readings[k].move for k in keys]

    def play(coalition: Coalition) -> list[float]:
        on = {changes[i - n_causes].name for i in coalition if i >= n_causes}
        setting = background.interventions_with(on)
        base = scm.intervene(setting) if setting else scm
        causes = tuple(
            iv for i in sorted(coalition) if i < n_causes for iv in scm.interventions_for(draws[i])
        )
        return moves(base.simulate(causes, seed=noise, counterfactual=False).factual)

    everything = frozenset(range(n))
    known = {everything: [a.move for a in shown]}
    if n_causes == 1:  # the counterfactual world: every background change, no cause
        known[everything - {0}] = moves(episode.worlds.counterfactual)
    game = _CachedGame(play, known)
    method = "exact" if n <= exact_players else "pairwise"
    estimate = shapley_exact if method == "exact" else shapley_pairwise
    values = estimate(game, n, len(keys))
    factual, empty = game(everything), game(frozenset())

    def share(value: float, a: int) -> float:
        return value / factual[a] + 0.0 if factual[a] != 0 else 0.0

    residual = {}
    for a, name in enumerate(names):
        gap = factual[a] - empty[a] - math.fsum(v[a] for v in values)
        residual[name] = share(gap, a)
    per_player = [{name: share(v[a], a) for a, name in enumerate(names)} for v in values]
    return ChangeAttribution(
        alerts=tuple(names),
        causes={d.point: per_player[i] for i, d in enumerate(draws)},
        background={c.name: per_player[n_causes + j] for j, c in enumerate(changes)},
        kinds={c.name: c.kind for c in changes},
        descriptions={c.name: c.description for c in changes},
        nameable={c.name: c.nameable for c in changes},
        natural={name: share(empty[a], a) for a, name in enumerate(names)},
        residual=residual if method == "pairwise" else {name: 0.0 for name in names},
        method=method,
        worlds=game.played,
    )
