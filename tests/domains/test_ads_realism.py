"""The ads domain's realism table: every quantity a practitioner checks is inside the range the
platform facts give, on episodes of the default preset over two seeds and three causes; and the
measure functions give the known answer on small hand-made tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from causaltrace import load_domain
from causaltrace.episodes.sampling import EpisodeSpec, build_visible, episode_id
from causaltrace_domains.ads import realism
from causaltrace_domains.ads.realism import (
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


@pytest.mark.parametrize("quantity", QUANTITIES, ids=lambda q: q.name)
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
