"""Attribution over every change (causaltrace.episodes.change_shares): the Shapley estimators
on games whose values are known in closed form, and the attribution of real ads episodes, whose
worlds are rebuilt with every change switched on and off.

The estimators are checked against the Harsanyi form of a game: with dividends ``d_T``, the
Shapley value of ``i`` is ``sum_{T ∋ i} d_T / |T|`` exactly, so the expected values below are
computed from the dividends, not from the code under test.
"""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import combinations

import numpy as np
import pytest

from causaltrace import BackgroundChange, Scale, Window, load_domain
from causaltrace.episodes.acceptance import check_change_shares
from causaltrace.episodes.change_shares import (
    attribute_changes,
    shapley_exact,
    shapley_pairwise,
)
from causaltrace.episodes.domain import Background, DomainError
from causaltrace.episodes.sampling import EpisodeSpec, build_episode, episode_id
from causaltrace.episodes.verify import VerifierConfig
from causaltrace.model.slices import Slice


def dividend_game(dividends: dict[frozenset[int], float]):
    def game(coalition: frozenset[int]) -> list[float]:
        return [math.fsum(d for t, d in dividends.items() if t <= coalition)]

    return game


def shapley_from_dividends(dividends, n: int) -> list[float]:
    return [math.fsum(d / len(t) for t, d in dividends.items() if i in t) for i in range(n)]


def random_dividends(rng: np.random.Generator, n: int, max_order: int):
    return {
        frozenset(t): float(rng.normal())
        for order in range(1, max_order + 1)
        for t in combinations(range(n), order)
    }


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_exact_shapley_is_the_dividend_split(seed):
    rng = np.random.default_rng(seed)
    n = 5
    dividends = random_dividends(rng, n, max_order=n)
    values = shapley_exact(dividend_game(dividends), n, 1)
    assert [v[0] for v in values] == pytest.approx(shapley_from_dividends(dividends, n), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_pairwise_estimate_is_exact_without_three_way_interactions(seed):
    rng = np.random.default_rng(seed)
    n = 7
    dividends = random_dividends(rng, n, max_order=2)
    values = shapley_pairwise(dividend_game(dividends), n, 1)
    assert [v[0] for v in values] == pytest.approx(shapley_from_dividends(dividends, n), abs=1e-12)


def test_pairwise_residual_measures_higher_order_interaction():
    # One three-way dividend d on {0, 1, 2}: each of them is owed d/3, the pairwise estimate
    # gives d/2 each, and the efficiency residual is d (1 - 3/2) = -d/2.
    d = 0.6
    dividends = {frozenset({0}): 1.0, frozenset({3}): -0.4, frozenset({0, 1, 2}): d}
    game = dividend_game(dividends)
    values = [v[0] for v in shapley_pairwise(game, 4, 1)]
    assert values == pytest.approx([1.0 + d / 2, d / 2, d / 2, -0.4])
    residual = game(frozenset(range(4)))[0] - game(frozenset())[0] - math.fsum(values)
    assert residual == pytest.approx(-d / 2)


def test_a_change_must_group_the_backgrounds_own_interventions():
    held = Scale("cvr", where=Slice(), window=Window(3), factor=1.1)
    stray = Scale("cvr", where=Slice(), window=Window(3), factor=1.1)
    with pytest.raises(DomainError, match="not among the background's interventions"):
        Background((held,), changes=(BackgroundChange("a", "promo", (stray,)),))
    with pytest.raises(DomainError, match="two changes are named 'a'"):
        Background(
            (held,),
            changes=(BackgroundChange("a", "x", (held,)), BackgroundChange("a", "y", ())),
        )
    background = Background((held,), changes=(BackgroundChange("a", "promo", (held,)),))
    assert background.interventions_with(()) == ()
    assert background.interventions_with(("a",)) == (held,)
    with pytest.raises(DomainError, match=r"no change\(s\) named \['b'\]"):
        background.interventions_with(("b",))


# -- real episodes --------------------------------------------------------------------------

ADS = load_domain("ads", {"preset": "small"})
SIGNAL = ("LANDING_PAGE_BREAK", "BID_MODIFIER_CHANGE", "TRACKING_OUTAGE")


def _episode_with_alert(cause: str, seed: int, slice_order: int = 1):
    """The first attempt of a ``cause`` episode whose tables raise an alert."""
    for attempt in range(40):
        spec = EpisodeSpec(episode_id("t", seed), "t", seed, 20261206, cause, slice_order)
        episode = build_episode(ADS, spec.with_attempt(attempt))
        shown = ADS.shown_alerts(ADS.alert_readings(episode.tables))
        if shown and any(c.interventions for c in episode.background.changes):
            return episode
    pytest.fail(f"no attempt of {cause} (seed {seed}) raised an alert in 40")


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cause", SIGNAL)
def test_exact_shares_add_up_to_the_factual_move(cause, seed):
    """Efficiency on the real game: the causes', the background's and the natural shares of
    each shown alert sum to 1 (every coalition simulated; the full coalition is the episode's
    own factual world, so this also checks that switching every change on rebuilds it)."""
    episode = _episode_with_alert(cause, seed)
    players = 1 + sum(1 for c in episode.background.changes if c.interventions)
    exact = attribute_changes(ADS, episode, exact_players=players)
    assert exact.method == "exact"
    for alert in exact.alerts:
        total = (
            math.fsum(s[alert] for s in exact.causes.values())
            + math.fsum(s[alert] for s in exact.background.values())
            + exact.natural[alert]
        )
        assert total == pytest.approx(1.0, abs=1e-9)
    # the label's record holds the same shares, the causes' with the background's, so that a
    # reader of the label alone can check it (tests/generation/test_committed_change_shares.py)
    record = exact.to_dict()
    assert record["causes"] == {c: dict(s) for c, s in exact.causes.items()}
    assert {n: b["shares"] for n, b in record["background"].items()} == exact.background


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("cause", SIGNAL)
def test_pairwise_shares_differ_from_exact_by_what_the_residual_allows(cause, seed):
    """The pairwise estimate against every coalition played. A share's error is the sum over
    the coalitions T >= 3 holding it of d_T (1/2 - 1/|T|), the residual the sum over all such T
    of d_T (1 - |T|/2): where three-way interactions dominate and share a sign, each error is at
    most a third of the residual's size (1/6 against 1/2 per triple); the slack allows the
    residual whole, plus 0.01 of the move for interactions of mixed sign that cancel in it."""
    episode = _episode_with_alert(cause, seed)
    players = 1 + sum(1 for c in episode.background.changes if c.interventions)
    exact = attribute_changes(ADS, episode, exact_players=players)
    pairwise = attribute_changes(ADS, episode, exact_players=0)
    assert pairwise.method == "pairwise"
    assert pairwise.worlds <= 2 * players
    for alert in exact.alerts:
        slack = abs(pairwise.residual[alert]) + 0.01
        for name, shares in exact.background.items():
            assert pairwise.background[name][alert] == pytest.approx(shares[alert], abs=slack)
        for name, shares in exact.causes.items():
            assert pairwise.causes[name][alert] == pytest.approx(shares[alert], abs=slack)


def _with_change(episode, change: BackgroundChange):
    background = episode.background
    return replace(
        episode,
        background=replace(
            background,
            interventions=(*background.interventions, *change.interventions),
            changes=(*background.changes, change),
        ),
    )


def test_a_change_that_does_nothing_gets_no_share_and_one_that_moves_the_alert_is_caught():
    episode = _episode_with_alert("LANDING_PAGE_BREAK", 1)
    n_time = ADS.scm.panel.n_time
    idle = BackgroundChange(
        "idle#1", "idle", (Scale("cvr", where=Slice(), window=Window(n_time - 7), factor=1.0),)
    )
    attribution = attribute_changes(ADS, _with_change(episode, idle), exact_players=0)
    assert all(share == 0.0 for share in attribution.background["idle#1"].values())
    # A sitewide CVR cut in the alert window moves every conversion alert as the cause does.
    cut = BackgroundChange(
        "cut#1", "cut", (Scale("cvr", where=Slice(), window=Window(n_time - 7), factor=0.5),)
    )
    moved = attribute_changes(ADS, _with_change(episode, cut), exact_players=0)
    assert max(moved.background["cut#1"].values()) >= 0.1
    verdict = check_change_shares(moved, VerifierConfig(background_share=0.1))
    assert verdict is not None and verdict.reasons[0].startswith("background_moves_alert:cut:")
    assert check_change_shares(moved, VerifierConfig()) is None  # the gate off: not read


def test_the_new_verifier_keys_are_recorded_only_when_set():
    assert "background_share" not in VerifierConfig().record()
    on = VerifierConfig(background_share=0.1).record()
    assert on["background_share"] == 0.1 and "exact_players" not in on
