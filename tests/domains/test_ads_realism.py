"""The ads domain's realism table: every quantity a practitioner checks is inside the range the
platform facts give, on episodes of the default preset over two seeds and three causes; and the
measure functions give the known answer on small hand-made tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from causaltrace import load_domain
from causaltrace.episodes.sampling import EpisodeSpec, build_visible, episode_id
from causaltrace_domains.ads import realism
from causaltrace_domains.ads.changes import COLUMNS as CHANGE_COLUMNS
from causaltrace_domains.ads.realism import (
    PHYSICS_QUANTITIES,
    QUANTITIES,
    Measurement,
    Quantity,
    measure_all,
    to_markdown,
)

SEEDS = (11, 12)
CAUSES = ("NO_ANOMALY", "BUDGET_CAP", "TRACKING_OUTAGE")


@pytest.fixture(scope="module")
def episodes():
    domain = load_domain("ads")  # the default preset
    built = []
    for seed in SEEDS:
        for i, cause in enumerate(CAUSES):
            spec = EpisodeSpec(episode_id("realism", i), "realism", i, seed, cause, None)
            built.append(build_visible(domain, spec)[0])
    return realism.Pool(built)


# The physics rules of issue 39 are switched on by config keys that the committed splits (and
# the default preset) leave off; tests/domains/test_ads_budget_rules.py measures the budget
# rules with theirs on, and the hand-made tables below show what each quantity counts.
ESTABLISHED = [q for q in QUANTITIES if q not in PHYSICS_QUANTITIES]


@pytest.mark.parametrize("quantity", ESTABLISHED, ids=lambda q: q.name)
def test_quantity_in_practitioner_range(episodes, quantity: Quantity):
    result = quantity.measure(episodes)
    value, note = (result.value, result.note) if isinstance(result, Measurement) else (result, "")
    assert quantity.in_range(value), (
        f"{quantity.name}: measured {quantity.format(value)} {note}, "
        f"a practitioner expects {quantity.expected}"
    )


def test_table_has_a_row_per_quantity(episodes):
    rows = measure_all(episodes)
    assert [r.quantity.name for r in rows] == [q.name for q in QUANTITIES]
    lines = to_markdown(rows).splitlines()
    assert lines[0] == "| quantity | practitioner range | measured | in range |"
    assert len(lines) == 2 + len(QUANTITIES)
    assert all(line.count(" | ") >= 3 for line in lines)


def test_command_generates_and_prints_the_table(capsys):
    assert realism.main(["--generate", "1", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "| brand search CTR | 10-30% |" in out
    assert f"/{len(QUANTITIES)} quantities in range" in out


# --------------------------------------------------------------------------------------------
# Measures on hand-made tables

LAST = pd.Timestamp("2026-02-28")


def perf_rows(rows: list[dict], days: int = 30) -> pd.DataFrame:
    """perf_daily rows repeated over ``days`` days ending on LAST; a row's values may be
    callables of the row's age in days."""
    out = []
    for age in range(days):
        for row in rows:
            values = {k: v(age) if callable(v) else v for k, v in row.items()}
            out.append(
                {
                    "date": LAST - pd.Timedelta(days=age),
                    "creative": "c",
                    "device": "desktop",
                    "browser_os": "desktop_chrome",
                    "geo": "us_west",
                    "audience": "broad",
                    "impressions": 0,
                    "clicks": 0,
                    "cost": 0.0,
                    "conversions": 0,
                    **values,
                }
            )
    return pd.DataFrame(out)


def test_ctr_matured_cvr_and_partners_ratio():
    perf = perf_rows(
        [
            {
                "campaign": "brand_search",
                "placement": "search",
                "impressions": 1000,
                "clicks": 200,
                # 10% CVR once matured, nothing reported for the last 14 days
                "conversions": lambda age: 20 if age >= 14 else 0,
            },
            {
                "campaign": "brand_search",
                "placement": "search_partners",
                "impressions": 1000,
                "clicks": 50,
            },
            {
                "campaign": "generic_search",
                "placement": "search",
                "impressions": 1000,
                "clicks": 50,
            },
            {
                "campaign": "generic_search",
                "placement": "search_partners",
                "impressions": 1000,
                "clicks": 20,
            },
        ]
    )
    episodes = [{"perf_daily": perf}]
    assert realism._ctr("brand_search", "search")(episodes) == pytest.approx(0.2)
    assert realism._matured_cvr("brand_search", "search")(episodes) == pytest.approx(0.1)
    ratio = realism.partners_ctr_ratio(episodes)  # 0.25 for brand, 0.4 for generic
    assert ratio.value == pytest.approx(0.4)
    assert "generic_search" in ratio.note


def test_rates_pool_rows_rather_than_average_ratios():
    a = perf_rows(
        [{"campaign": "brand_search", "placement": "search", "impressions": 100, "clicks": 50}]
    )
    b = perf_rows(
        [{"campaign": "brand_search", "placement": "search", "impressions": 900, "clicks": 90}]
    )
    # pooled 140 / 1000, not the mean of 0.5 and 0.1
    ctr = realism._ctr("brand_search", "search")([{"perf_daily": a}, {"perf_daily": b}])
    assert ctr == pytest.approx(0.14)


def test_frequency_median_by_campaign_type():
    campaigns = pd.DataFrame(
        {
            "campaign": ["brand_search", "remarketing"],
            "campaign_type": ["search", "display"],
        }
    )
    rf = pd.DataFrame(
        {
            "date": pd.to_datetime(["2026-01-05"] * 4 + ["2026-01-06"]),
            "campaign": ["brand_search", "brand_search", "brand_search", "remarketing", "x"],
            "creative": ["b1", "b2", "b3", "r1", "x1"],
            "impressions": [110, 120, 500, 300, 0],
            "reach": [100, 100, 100, 100, 0],
        }
    )
    episodes = [{"campaigns": campaigns, "reach_frequency_daily": rf}]
    assert realism.search_frequency(episodes) == pytest.approx(1.2)
    assert realism.remarketing_frequency(episodes) == pytest.approx(3.0)


def hourly_day(date: str, profile: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "date": pd.Timestamp(date),
            "hour": range(24),
            "campaign": "generic_search",
            "device": "mobile",
            "impressions": profile,
        }
    )


@pytest.mark.parametrize(
    "limited_profile, expected",
    [
        ([100] * 17 + [0] * 7, 0.0),  # cut at 17:00: nothing late
        ([50] * 24, 1.0),  # throttled all day: the same late share
    ],
)
def test_pacing_late_share_ratio(limited_profile, expected):
    days = ["2026-02-20", "2026-02-21", "2026-02-22", "2026-02-23"]
    hourly = pd.concat(
        [
            hourly_day(days[0], [100] * 24),
            hourly_day(days[1], [100] * 24),
            hourly_day(days[2], limited_profile),
            hourly_day(days[3], limited_profile),
        ],
        ignore_index=True,
    )
    shares = pd.DataFrame(
        {
            "date": pd.to_datetime(days * 2),
            "campaign": ["generic_search"] * 4 + ["remarketing"] * 4,
            "search_lost_is_budget": [0.0, 0.05, 0.3, 0.4] + [math.nan] * 4,
        }
    )
    result = realism.pacing_late_share_ratio(
        [{"perf_hourly": hourly, "impression_share_daily": shares}]
    )
    assert result.value == pytest.approx(expected)
    assert "generic_search/mobile" in result.note


def test_conversion_lag_from_curve_and_from_perf_daily():
    curve = pd.DataFrame(
        {"days_since_click": range(22), "share_reported": [0.5 + 0.02 * k for k in range(22)]}
    )
    with_curve = [{"conversion_lag_curve": curve}]
    assert realism._lag_share(0)(with_curve).value == pytest.approx(0.5)
    assert realism._lag_share(14)(with_curve).value == pytest.approx(0.78)
    beyond = realism._lag_share(28)(with_curve)  # the curve's last value bounds it from below
    assert beyond.value == pytest.approx(0.92)
    assert "day 21" in beyond.note
    # Without the curve: the reported CVR of young days against matured days of their weekday.
    perf = perf_rows(
        [
            {
                "campaign": "brand_search",
                "placement": "search",
                "impressions": 1000,
                "clicks": 100,
                "conversions": lambda age: 4 if age == 0 else (7 if age == 14 else 8),
            }
        ],
        days=56,
    )
    without = [{"perf_daily": perf}]
    estimate = realism._lag_share(0)(without)
    assert estimate.value == pytest.approx(0.5)
    assert "estimated" in estimate.note
    assert realism._lag_share(14)(without).value == pytest.approx(7 / 8)
    assert realism.last_day_share(without) == pytest.approx(0.5)


def test_auction_insights_sets_and_display_rows():
    perf = perf_rows(
        [
            {"campaign": "brand_search", "placement": "search"},
            {"campaign": "generic_search", "placement": "search_partners"},
            {"campaign": "remarketing", "placement": "display"},
        ],
        days=1,
    )

    def insights(rows):
        return pd.DataFrame(rows, columns=["date", "campaign", "competitor"]).assign(
            date=pd.Timestamp(LAST)
        )

    same = insights(
        [
            (None, "brand_search", "you"),
            (None, "brand_search", "a.example"),
            (None, "brand_search", "b.example"),
            (None, "generic_search", "you"),
            (None, "generic_search", "b.example"),
            (None, "generic_search", "c.example"),
            (None, "remarketing", "a.example"),
        ]
    )
    episodes = [{"perf_daily": perf, "auction_insights_daily": same}]
    # brand {a, b} vs generic {b, c}: 1/3; brand vs remarketing {a}: 1/2
    assert realism.competitor_jaccard(episodes).value == pytest.approx(0.5)
    assert realism.display_auction_rows(episodes).value == 1
    assert realism._display_only(realism.Pool(episodes)) == {"remarketing"}


def test_display_is_missing_share():
    perf = perf_rows(
        [
            {"campaign": "brand_search", "placement": "search"},
            {"campaign": "remarketing", "placement": "display"},
        ],
        days=2,
    )
    shares = pd.DataFrame(
        {
            "date": [LAST, LAST - pd.Timedelta(days=1)] * 2,
            "campaign": ["brand_search"] * 2 + ["remarketing"] * 2,
            "search_impression_share": [0.9, 0.9, math.nan, 0.5],
            "search_lost_is_rank": [0.1, 0.1, math.nan, 0.5],
            "search_lost_is_budget": [0.0, 0.0, math.nan, 0.0],
        }
    )
    result = realism.display_is_missing([{"perf_daily": perf, "impression_share_daily": shares}])
    assert result.value == pytest.approx(0.5)


def test_holiday_ramp_and_day():
    holiday = "2026-02-14"
    h = pd.Timestamp(holiday)

    def clicks(age: int) -> int:
        date = LAST - pd.Timedelta(days=age)
        if date == h:
            return 80
        if h - pd.Timedelta(days=7) <= date <= h - pd.Timedelta(days=1):
            return 120
        return 100

    perf = perf_rows(
        [
            {
                "campaign": "brand_search",
                "placement": "search",
                "impressions": 1000,
                "clicks": clicks,
            }
        ],
        days=56,
    )
    episodes = [{"perf_daily": perf}]
    assert realism.holiday_ramp([holiday])(episodes).value == pytest.approx(1.2)
    assert realism.holiday_day([holiday])(episodes).value == pytest.approx(80 / 120)
    assert math.isnan(realism.holiday_ramp(["2025-12-25"])(episodes).value)


def test_daily_budgets_from_change_history():
    campaigns = pd.DataFrame({"campaign": ["a"], "daily_budget": [50]})
    changes = pd.DataFrame(
        {
            "change_time": pd.to_datetime(["2026-02-10 09:00", "2026-02-20 15:00"]),
            "campaign": ["a", "a"],
            "field": ["daily_budget", "daily_budget"],
            "old_value": ["100", "80"],
            "new_value": ["80", "50"],
        }
    )
    dates = pd.date_range("2026-02-09", "2026-02-21")
    budgets = realism.daily_budgets(campaigns, changes, dates).set_index("date")["budget"]
    assert budgets[pd.Timestamp("2026-02-09")] == 100
    assert pd.Timestamp("2026-02-10") not in budgets.index  # the day of an edit: two budgets
    assert budgets[pd.Timestamp("2026-02-15")] == 80
    assert budgets[pd.Timestamp("2026-02-21")] == 50


def test_strict_and_inclusive_bounds():
    below = Quantity("q", "< 0.5", None, 0.5, lambda e: 0.0, strict=True)
    assert below.in_range(0.49) and not below.in_range(0.5) and not below.in_range(math.nan)
    one = Quantity("q", "1", 1.0, 1.0, lambda e: 0.0)
    assert one.in_range(1.0) and not one.in_range(0.99)
    row = realism.Row(Quantity("ctr", "10-30%", 0.1, 0.3, lambda e: 0.0, "%"), 0.05)
    assert row.status == "**no** (below by 5.00 pp)"


# --------------------------------------------------------------------------------------------
# Physics rules (issue 39) on hand-made tables: a planted violation is counted, a clean table
# is not.

HOURLY_DAYS = pd.date_range("2026-02-10", periods=10)
EDIT_DAY = HOURLY_DAYS[8]


def hourly_table(lift_from: int | None, lift_day=EDIT_DAY, seed: int = 0) -> pd.DataFrame:
    """perf_hourly of one campaign and device over ten days (Poisson counts around a flat
    profile, fixed seed), the counts tripled on ``lift_day`` from hour ``lift_from`` on."""
    rng = np.random.default_rng(seed)
    rows = []
    for day in HOURLY_DAYS:
        for hour in range(24):
            impressions = int(rng.poisson(1000))
            if lift_from is not None and day == lift_day and hour >= lift_from:
                impressions *= 3
            clicks = impressions // 20
            rows.append((day, hour, "generic_search", "mobile", impressions, clicks, clicks * 1.5))
    columns = ["date", "hour", "campaign", "device", "impressions", "clicks", "cost"]
    return pd.DataFrame(rows, columns=columns)


def history(*rows) -> pd.DataFrame:
    """change_history rows (time, campaign, target, field)."""
    return pd.DataFrame(
        [
            (pd.Timestamp(t), "a@x.example", c, "bid_modifier", target, field, "+0%", "+50%")
            for t, c, target, field in rows
        ],
        columns=list(CHANGE_COLUMNS),
    )


EDIT = (f"{EDIT_DAY.date()} 15:20", "generic_search", "device=mobile", "bid_adjustment")


@pytest.mark.parametrize(
    "lift_from, expected",
    [
        (
            0,
            1.0,
        ),  # the effect starts at midnight: the hours before 15:00 depart, not the day before
        (15, 0.0),  # it starts at the edit: nothing departs before 15:00
    ],
)
def test_edit_timing_counts_effects_before_the_edit(lift_from, expected):
    tables = {"perf_hourly": hourly_table(lift_from), "change_history": history(EDIT)}
    result = realism.edit_timing([tables])
    assert result.value == pytest.approx(expected)
    assert result.note == f"edit day {int(expected)}/1, the day before 0/1"


def test_edit_timing_reads_effectful_edits_only():
    harmless = (EDIT[0], "generic_search", "campaign", "negative_keywords")
    tables = {"perf_hourly": hourly_table(0), "change_history": history(harmless)}
    assert math.isnan(realism.edit_timing([tables]).value)
    # An effect that starts a day early is counted on the day before.
    early = {
        "perf_hourly": hourly_table(0, lift_day=HOURLY_DAYS[7]),
        "change_history": history(EDIT),
    }
    assert realism.edit_timing([early]).value == pytest.approx(-1.0)


BUDGET_DAYS = 20


def budget_tables(cost, lost, budget: float = 100.0) -> dict:
    """One search campaign over ``BUDGET_DAYS`` days with a budget of ``budget`` throughout:
    ``cost`` and ``lost`` (lost IS to budget) are callables of the day's age."""
    perf = perf_rows(
        [
            {
                "campaign": "generic_search",
                "placement": "search",
                "impressions": 1000,
                "clicks": 50,
                "cost": cost,
            }
        ],
        days=BUDGET_DAYS,
    )
    dates = [LAST - pd.Timedelta(days=age) for age in range(BUDGET_DAYS)]
    shares = pd.DataFrame(
        {
            "date": dates,
            "campaign": "generic_search",
            "search_impression_share": [0.8] * BUDGET_DAYS,
            "search_lost_is_rank": [0.2 - lost(age) for age in range(BUDGET_DAYS)],
            "search_lost_is_budget": [lost(age) for age in range(BUDGET_DAYS)],
        }
    )
    campaigns = pd.DataFrame({"campaign": ["generic_search"], "daily_budget": [budget]})
    return {
        "perf_daily": perf,
        "impression_share_daily": shares,
        "campaigns": campaigns,
        "change_history": history(),
    }


def test_days_and_months_over_budget():
    # One day at 2.5x, the rest at 0.5x: a day over the cap, the month under its budgets.
    spiky = budget_tables(lambda age: 250.0 if age == 3 else 50.0, lambda age: 0.1)
    assert realism.days_over_twice_budget([spiky]).value == 1
    assert realism.months_over_budget([spiky]).value == 0
    # 1.2x every day: no day over the cap, the month over its budgets.
    steady = budget_tables(lambda age: 120.0, lambda age: 0.1)
    assert realism.days_over_twice_budget([steady]).value == 0
    months = realism.months_over_budget([steady])
    assert months.value == 1 and "max 1.200" in months.note
    # Over- and underdelivery that balance: neither.
    balanced = budget_tables(lambda age: 190.0 if age % 2 else 10.0, lambda age: 0.1)
    assert realism.days_over_twice_budget([balanced]).value == 0
    assert realism.months_over_budget([balanced]).value == 0


def test_lost_is_when_budget_binds():
    # Days at or over budget, half of them without impression share lost to budget.
    def cost(age):
        return 110.0 if age < 8 else 60.0

    def lost(age):
        return 0.0 if age < 4 else 0.05

    result = realism.lost_is_when_budget_binds([budget_tables(cost, lost)])
    assert result.value == pytest.approx(0.5)
    assert result.note.startswith("4 of 8 campaign-days")
    clean = realism.lost_is_when_budget_binds([budget_tables(cost, lambda age: 0.05)])
    assert clean.value == 1.0


def cutoff_hourly(dates, stop: set) -> pd.DataFrame:
    """perf_hourly of generic_search/mobile: 100 impressions an hour, none at 23:00 on
    ``stop`` days."""
    rows = [
        (d, h, "generic_search", "mobile", 0 if (h == 23 and d in stop) else 100)
        for d in dates
        for h in range(24)
    ]
    return pd.DataFrame(rows, columns=["date", "hour", "campaign", "device", "impressions"])


def test_lost_is_reads_the_hourly_cutoff():
    # Under budget every day, but serving stopped before midnight on two days without any
    # impression share lost to budget; one of them has a pause logged (not a budget stop).
    tables = budget_tables(lambda age: 60.0, lambda age: 0.0)
    dates = [LAST - pd.Timedelta(days=age) for age in range(7)]
    tables["perf_hourly"] = cutoff_hourly(dates, {dates[1], dates[2]})
    tables["change_history"] = history(
        (f"{dates[2].date()} 22:10", "generic_search", "campaign", "status")
    )
    result = realism.lost_is_when_budget_binds([tables])
    assert result.value == 0.0 and result.note.startswith("0 of 1 campaign-days")


FATIGUE_DATES = pd.date_range("2026-02-01", periods=28)


def halves_at_day_14(day: int) -> tuple[int, int]:
    """100,000 impressions a day at 1% CTR, 0.5% from day 14 on: fatigue, its deepest
    week-on-week fall (50%) the week to day 20 (2026-02-21)."""
    return 100_000, 1000 if day < 14 else 500


def fatigue_tables(frequency, display=halves_at_day_14, video=lambda day: (100_000, 600)) -> dict:
    """Four weeks of a remarketing banner on two placements, ``(impressions, clicks)`` a day
    on each from ``display(day)`` and ``video(day)`` (by default its display CTR halves at day
    14, video keeps 0.6%), and its daily frequency ``frequency(day)``."""
    rows, rf = [], []
    for i, day in enumerate(FATIGUE_DATES):
        total = 0
        for placement, served in (("display", display), ("video", video)):
            impressions, clicks = served(i)
            total += impressions
            rows.append(
                {
                    "date": day,
                    "campaign": "remarketing",
                    "creative": "rmkt_banner_1",
                    "placement": placement,
                    "impressions": impressions,
                    "clicks": clicks,
                }
            )
        rf.append(
            {
                "date": day,
                "campaign": "remarketing",
                "creative": "rmkt_banner_1",
                "impressions": total,
                "reach": round(total / frequency(i)),
                "frequency": round(frequency(i), 3),
            }
        )
    return {"perf_daily": pd.DataFrame(rows), "reach_frequency_daily": pd.DataFrame(rf)}


def test_fatigue_without_frequency():
    # The display CTR halves at steady volume, a real fall: with a flat frequency it is
    # fatigue without frequency, with a frequency that climbs (3.0 to 3.7 on average from one
    # week to the next, +23%) it is what fatigue looks like.
    flat = realism.fatigue_without_frequency([fatigue_tables(lambda day: 1.15)])
    assert flat.value == 1.0
    assert flat.note.startswith("1 of 1 fatigue-like falls with flat frequency; deepest 50% ")
    assert "(remarketing/rmkt_banner_1/display, week to 2026-02-21)" in flat.note
    growing = realism.fatigue_without_frequency([fatigue_tables(lambda day: 2.0 + 0.1 * day)])
    assert growing.value == 0.0 and growing.note.startswith("0 of 1 fatigue-like falls")


def test_fatigue_ignores_a_noise_sized_dip():
    """A week of 45 clicks after one of 70 on 7,000 impressions each: 36% lower, and one-sided
    z = 2.3 (significant on its own), but not over the 30 week-on-week comparisons of the
    table (Bonferroni: z >= 2.94)."""

    def dip(day: int) -> tuple[int, int]:
        return 1000, (6 + day % 2 if 14 <= day < 21 else 10)

    assert sum(dip(day)[1] for day in range(14, 21)) == 45
    result = realism.fatigue_without_frequency([fatigue_tables(lambda day: 1.15, display=dip)])
    assert result.value == 0.0
    assert result.note == (
        "no fatigue-like CTR fall (30 week-on-week comparisons, 0 series with a significant "
        "fall of 30% or more, 0 of them only with a change of volume)"
    )


def test_fatigue_ignores_a_fall_that_changes_volume():
    """An audience expansion: the display placement serves three times the impressions from
    day 14 at half the CTR. A real fall, but new people, not fatigue."""

    def expanded(day: int) -> tuple[int, int]:
        return (100_000, 1000) if day < 14 else (300_000, 1500)

    result = realism.fatigue_without_frequency([fatigue_tables(lambda day: 1.15, expanded)])
    assert result.value == 0.0
    assert "1 series with a significant fall of 30% or more, 1 of them only with a change of" in (
        result.note
    )


def test_fatigue_ignores_a_mix_shift_between_placements():
    """A placement shift: from day 14 two thirds of the display traffic move to video, whose
    CTR is lower (and falls by a third on the new inventory). The creative serves as many
    impressions as before and its blended CTR falls by half, but per placement display keeps
    its CTR and video's fall comes with three times the impressions: no fatigue-like fall."""

    def display(day: int) -> tuple[int, int]:
        return (150_000, 1500) if day < 14 else (50_000, 500)

    def video(day: int) -> tuple[int, int]:
        return (50_000, 150) if day < 14 else (150_000, 300)

    tables = fatigue_tables(lambda day: 1.15, display, video)
    perf = tables["perf_daily"]
    blended = perf.groupby(perf["date"] >= "2026-02-15")[["clicks", "impressions"]].sum()
    assert blended.loc[True, "impressions"] == blended.loc[False, "impressions"]
    assert blended.loc[True, "clicks"] / blended.loc[False, "clicks"] < 0.5
    result = realism.fatigue_without_frequency([tables])
    assert result.value == 0.0 and result.note.startswith("no fatigue-like CTR fall")
    assert "1 series with a significant fall of 30% or more, 1 of them only" in result.note


ALERT_DAYS = pd.date_range("2026-01-26", periods=35)  # four baseline weeks, then the window
HOLIDAY_DAYS = ALERT_DAYS[10:13]


def alert_tables(clause: str) -> dict:
    """35 days of one campaign: 100 clicks a day, 200 on three holiday days of the baseline,
    110 in the alert window; conversions 50 a day, of which the share the curve gives for
    the day's age is reported (the curve ends at age 20: older days take its last row)."""
    curve = pd.DataFrame(
        {"days_since_click": range(21), "share_reported": [0.5 + 0.02 * k for k in range(21)]}
    )
    share = curve["share_reported"].to_numpy()
    last = len(ALERT_DAYS) - 1
    rows = []
    for i, day in enumerate(ALERT_DAYS):
        clicks = 110 if i >= 28 else (200 if day in HOLIDAY_DAYS else 100)
        reported = 50.0 * share[min(last - i, 20)]
        rows.append(
            {
                "date": day,
                "campaign": "generic_search",
                "clicks": clicks,
                "cost": clicks * 2.0,
                "conversions": reported,
                "conversion_value": reported * 80.0,
            }
        )
    d = [str(x.date()) for x in ALERT_DAYS]
    lines = [
        f"ALERT: clicks for the account is up 10.0%: 770.00 over {d[28]} to {d[34]} against "
        f"700.00 for the same weekdays on average over {d[0]} to {d[27]}{clause}.",
        f"ALERT: conversions for campaign generic_search is down 0.0%: 350.00 over {d[28]} to "
        f"{d[34]} against 350.00 for the same weekdays on average over {d[0]} to "
        f"{d[27]}{clause}.",
    ]
    prompt = "The monitoring rule ... (days_since_click: 0 for 2026-03-01)\n\n" + "\n".join(lines)
    return {
        "perf_daily": pd.DataFrame(rows),
        "conversion_lag_curve": curve,
        realism.PROMPT: realism.prompt_table(prompt),
    }


def test_alert_reproduces_with_the_stated_baseline():
    first, last = (str(x.date()) for x in (HOLIDAY_DAYS[0], HOLIDAY_DAYS[-1]))
    stated = alert_tables(f", leaving out {first}..{last} (holiday season)")
    result = realism.alert_reproduces([stated])
    assert result.value == 1.0 and result.note == "1 of 1 episodes, 2 of 2 alert lines"
    # Without the days stated, the clicks baseline reads 775 (three weekdays average a 200
    # day in): the printed 700 does not reproduce; conversions, flat, still do.
    unstated = realism.alert_reproduces([alert_tables(", leaving out no day")])
    assert unstated.value == 0.0 and unstated.note == "0 of 1 episodes, 1 of 2 alert lines"
    # A date elsewhere in the prompt is no left-out day.
    assert realism.stated_exclusions("leaving out no day") == []
