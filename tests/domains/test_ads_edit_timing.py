"""Edits that act from their hour (``edit_timing="hour"``) and fatigue that builds with
frequency (``fatigue="frequency"``), the ads domain's physics switches of issue 39.

Counts come from inverse CDFs of shared uniform noise and perf_hourly splits each row from its
own uniforms, so "no departure before the edit's hour" is checked exactly, hour by hour,
against the world without the edit rendered with the same generator, not statistically. The
small preset with 14 hourly days puts every onset of the prior (12 to 4 days before the end)
inside the hourly table.
"""

from __future__ import annotations

import copy
import itertools
from functools import cache

import numpy as np
import pandas as pd
import pytest

from causaltrace import load_domain
from causaltrace.episodes.sampling import EpisodeSpec, simulate_attempt
from causaltrace_domains.ads import render
from causaltrace_domains.ads.causes import EDIT_HOURS, EditTiming, account_change
from causaltrace_domains.ads.config import FREQUENCY_KINDS, FREQUENCY_PLACEMENTS
from causaltrace_domains.ads.edits import draw_edits

EDIT_CAUSES = ("BUDGET_CAP", "BID_MODIFIER_CHANGE", "TARGETING_EXPANSION")
COUNTS = ["impressions", "clicks", "cost", "conversions"]
SEEDS = range(5)


@cache
def timed_domain():
    return load_domain("ads", {"preset": "small", "edit_timing": "hour", "hourly_days": 14})


@cache
def attempt(cause: str, seed: int):
    return simulate_attempt(timed_domain(), EpisodeSpec("t", "test", seed, 31, cause, None))


def _hourly(domain, world, rng) -> pd.DataFrame:
    return render.perf_hourly(domain.scm.panel, world, domain.settings, copy.deepcopy(rng))


def _dates(frame: pd.DataFrame) -> np.ndarray:
    return frame["date"].to_numpy().astype("datetime64[D]")


def _day_hours(frame: pd.DataFrame, day, column: str) -> np.ndarray:
    """(row, hour) values of ``column`` on ``day`` (cost in cents)."""
    values = frame[column].to_numpy()[_dates(frame) == day].reshape(-1, 24)
    return np.round(values * 100).astype(np.int64) if column == "cost" else values


@pytest.mark.parametrize("cause", EDIT_CAUSES)
def test_an_edit_moves_no_hour_before_its_timestamp(cause):
    """Before the edit's hour its day is the day without it, hour for hour; from its hour on
    the day moves where the edit moved it. The one exception is a count the edit brought
    below what the hours before it held (a small count, e.g. a campaign-device's conversions,
    that fell by more than the day's share after the edit): then nothing falls after the edit
    and only the latest hours before it give up the difference."""
    domain = timed_domain()
    panel = domain.scm.panel
    moved = 0
    for seed in SEEDS:
        a = attempt(cause, seed)
        hour, onset = a.draw.extras["hour"], a.draw.window.onset
        assert EDIT_HOURS[0] <= hour < EDIT_HOURS[1]
        fact = _hourly(domain, a.worlds.factual, a.render_rng)
        counter = _hourly(domain, a.worlds.counterfactual, a.render_rng)
        day = panel.time.values.astype("datetime64[D]")[onset]
        dates = _dates(fact)
        earlier = (fact[COUNTS].to_numpy() != counter[COUNTS].to_numpy())[dates < day]
        assert not earlier.any()  # no day before the edit moves
        after_moved = False
        for column in COUNTS:
            f, c = _day_hours(fact, day, column), _day_hours(counter, day, column)
            short = f.sum(axis=1) < c[:, :hour].sum(axis=1)
            np.testing.assert_array_equal(f[~short, :hour], c[~short, :hour])
            np.testing.assert_array_equal(f[short, hour:], 0)
            assert (f[short, :hour] <= c[short, :hour]).all()
            after_moved |= bool((f[:, hour:] != c[:, hour:]).any())
        daily = [render.perf_daily(panel, w) for w in (a.worlds.factual, a.worlds.counterfactual)]
        at = _dates(daily[0]) == day
        if not np.array_equal(daily[0][COUNTS].to_numpy()[at], daily[1][COUNTS].to_numpy()[at]):
            assert after_moved  # an edit that moved its day moved the hours from its own on
            moved += 1
    # Most draws move their day; a budget cut that does not bind moves none (2 of 5 bind here).
    assert moved >= 2


@pytest.mark.parametrize("cause", EDIT_CAUSES)
def test_the_hours_sum_to_the_days(cause):
    domain = timed_domain()
    panel = domain.scm.panel
    keys = ["date", "campaign", "device"]
    for seed in SEEDS[:3]:
        a = attempt(cause, seed)
        for world in (a.worlds.factual, a.worlds.counterfactual):
            hourly = _hourly(domain, world, a.render_rng)
            daily = render.perf_daily(panel, world)
            days = hourly.groupby(keys, observed=True)[COUNTS].sum()
            expected = daily.groupby(keys, observed=True)[COUNTS].sum().loc[days.index]
            np.testing.assert_array_equal(
                days[["impressions", "clicks", "conversions"]],
                expected[["impressions", "clicks", "conversions"]],
            )
            np.testing.assert_allclose(days["cost"], expected["cost"], atol=0.005)


@pytest.mark.parametrize("cause", EDIT_CAUSES)
def test_the_edit_day_holds_the_share_of_the_day_after_the_edit(cause):
    """The intervened node takes the edit's share of its effect on the edit day (the traffic
    after its hour), its whole effect from the next day on; and the change history's row of
    the edit carries the edit's hour."""
    domain = timed_domain()
    scm, panel = domain.scm, domain.scm.panel
    for seed in SEEDS[:3]:
        a = attempt(cause, seed)
        hour, onset = a.draw.extras["hour"], a.draw.window.onset
        for iv in scm.interventions_for(a.draw):
            assert iv.window.start == hour / 24
            assert 0.0 < iv.window.onset_weight < 1.0
            if iv.node not in ("bid_modifier", "targeting_eligibility", "budget_change"):
                continue
            mask = iv.where.mask(panel)
            gap = a.worlds.effect(iv.node)[mask]
            np.testing.assert_allclose(gap[:, onset], iv.window.onset_weight * gap[:, onset + 1])
        tables = domain.render(a.worlds.factual, a.draw, a.background, copy.deepcopy(a.render_rng))
        history = tables["change_history"]
        specs = {c.name: c for c in domain.settings.campaigns}
        day = panel.time.values.astype("datetime64[D]")[onset]
        for edit in draw_edits(account_change(cause), a.draw, panel, specs, hour):
            rows = history[
                (history["campaign"] == edit.campaign)
                & (history["field"] == edit.field)
                & (history["target"] == edit.target)
                & (history["change_time"].dt.floor("D") == pd.Timestamp(day))
            ]
            assert (rows["change_time"].dt.hour == hour).any()


def test_a_later_edit_weighs_less_of_its_day():
    domain = timed_domain()
    timing = EditTiming.of(domain.settings, domain.scm.panel)
    from causaltrace import Slice

    shares = [timing.share_after(Slice.of(device="desktop"), h) for h in (0, 9, 13, 17, 22)]
    assert shares[0] == pytest.approx(1.0)
    assert all(a > b for a, b in itertools.pairwise(shares))
    # Desktop traffic peaks at midday, mobile in the evening: at 17h more of mobile is left.
    assert timing.share_after(Slice.of(device="mobile"), 17) > shares[3]


def test_background_edits_act_from_their_hour():
    """Twins and effectful decoys: each intervention that starts on its edit's day starts at
    the edit's hour."""
    domain = timed_domain()
    scm = domain.scm
    checked = 0
    for seed in range(30):
        bg = domain.background(np.random.default_rng(seed), ())
        for item in (*bg.notes["twins"], *bg.notes["decoys"]):
            if not item.edits:
                continue
            edit = item.edits[0]
            for iv in item.interventions:
                if iv.window.onset == edit.day:
                    assert iv.window.start == edit.hour / 24
                    assert iv.window.onset_weight < 1.0
                    checked += 1
    assert checked >= 20
    assert scm is domain.scm


def test_day_timing_is_what_the_committed_splits_hold():
    """Without the key: no hour in the draws, whole-day windows everywhere."""
    domain = load_domain("ads", {"preset": "small"})
    scm, panel = domain.scm, domain.scm.panel
    for seed in range(10):
        rng = np.random.default_rng(seed)
        for cause in EDIT_CAUSES:
            draw = scm.point(cause).sample(rng, panel)
            assert "hour" not in draw.extras
            assert not any(iv.window.partial_onset for iv in scm.interventions_for(draw))
        bg = domain.background(np.random.default_rng(seed), ())
        assert not any(iv.window.partial_onset for iv in bg.interventions)


# -- creative fatigue -------------------------------------------------------------------------


@cache
def frequency_domain():
    return load_domain("ads", {"preset": "small", "fatigue": "frequency"})


def test_fatigue_is_drawn_only_where_frequency_builds():
    domain = frequency_domain()
    scm, panel = domain.scm, domain.scm.panel
    kinds = {c.name: c.kind for c in domain.settings.campaigns}
    rng = np.random.default_rng(0)
    for _ in range(60):
        draw = scm.point("CREATIVE_FATIGUE").sample(rng, panel)
        campaigns = set(panel.labels("campaign")[draw.slice.mask(panel)])
        assert {kinds[c] for c in campaigns} <= set(FREQUENCY_KINDS)


def test_ctr_falls_only_where_frequency_rises():
    domain = frequency_domain()
    panel, cfg = domain.scm.panel, domain.settings
    idx, n_rows = panel.group_index(("campaign", "creative"))
    on_inventory = np.isin(panel.labels("placement"), FREQUENCY_PLACEMENTS)
    fell_somewhere = 0
    for seed in range(6):
        spec = EpisodeSpec("t", "test", seed, 5, "CREATIVE_FATIGUE", None)
        worlds = simulate_attempt(domain, spec).worlds
        fell = worlds.factual["ctr"] < worlds.counterfactual["ctr"]
        assert not (worlds.factual["ctr"] > worlds.counterfactual["ctr"]).any()
        assert not fell[~on_inventory].any()  # search traffic does not fatigue
        rows_fell = np.zeros((n_rows, panel.n_time), dtype=bool)
        np.logical_or.at(rows_fell, idx, fell)
        frequency = [
            render.reach_frequency_daily(panel, w, cfg)["frequency"].to_numpy()
            for w in (worlds.factual, worlds.counterfactual)
        ]
        rose = (frequency[0] > frequency[1]).reshape(n_rows, panel.n_time)
        assert not (rows_fell & ~rose).any()  # every row whose CTR fell shows frequency up
        fell_somewhere += int(rows_fell.any())
    assert fell_somewhere == 6


def test_cumulative_fatigue_has_no_audience_node():
    assert "audience_size" not in load_domain("ads", {"preset": "small"}).scm.nodes
    assert "audience_size" in frequency_domain().scm.nodes
