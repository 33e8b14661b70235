"""A realism table for the ads domain, measured from the tables an analyst sees.

Each :class:`Quantity` is something a practitioner checks in an account (brand search CTR, the
impression share of brand terms, daily frequency of remarketing banners, the conversion lag, ...),
the range they expect (``../shared/ads-platform-facts.md``, e-commerce advertiser: typical values,
not hard limits) and a function that measures it from the agent-visible tables of one or more
episodes (a mapping table name -> DataFrame, as ``build_episode(...).tables`` gives or as read
from an episode directory's Parquet files).

Measures pool the episodes' rows: a rate is the sum of its numerator over all the episodes' rows
divided by the sum of its denominator, never a mean of per-episode ratios unless the quantity
says so. Anything that reads conversions uses matured days only (clicks at least
``MATURED_DAYS`` days before the episode's last day), because conversions are reported by click
date and keep arriving.

Command line::

    python -m causaltrace_domains.ads.realism DATASET_DIR [--episodes N] [--cache-dir DIR]
    python -m causaltrace_domains.ads.realism --generate N [--seed S]

The first opens the first N episodes of a generated dataset (materialized or lazy) through
:class:`causaltrace.env.DatasetSource`; the second builds N fresh episodes of the default ads
preset in memory, cycling over the domain's causes. Both print the table in Markdown.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from causaltrace_domains.ads.alert import KPIS as MONITOR_KPIS
from causaltrace_domains.ads.alert import LAGGED as MONITOR_LAGGED
from causaltrace_domains.ads.alert import TOTALS as MONITOR_TOTALS

Tables = Mapping[str, pd.DataFrame]

MATURED_DAYS = 14  # conversions of clicks at least this old count as (nearly) complete
LAG_REFERENCE_DAYS = 28  # the perf_daily lag estimate compares with clicks at least this old
SEARCH_PLACEMENTS = ("search", "search_partners")
SAFARI = ("ios_safari", "mac_safari")
US_GEOS = ("us_west", "us_central", "us_east", "us_south")
EU_UK_GEOS = ("uk", "germany", "france")
REMARKETING = "remarketing"
BRAND = "brand_search"
GENERIC = "generic_search"
YOU = "you"  # the account's own row in auction insights
LATE_HOUR = 18  # "after 18:00": hours 18..23
LIMITED_LOST_IS = 0.1  # a campaign-day is budget-limited above this lost IS (budget)
HOLIDAY_EXCLUDE = (10, 1)  # weekday checks drop the days from 10 before to 1 after a holiday
CHANGE_HISTORY_DAYS = 30  # platforms keep 30 days of edits


def _default_holidays() -> tuple[str, ...]:
    try:
        from causaltrace_domains.ads.config import AdsConfig

        return tuple(AdsConfig().holidays)
    except Exception:  # the config is being edited: fall back to the documented holiday
        return ("2026-02-14",)


class MissingTable(LookupError):
    """No episode has the table a quantity needs."""


@dataclass(frozen=True)
class Measurement:
    """A measured value with an optional note (how it was measured, why it is missing)."""

    value: float
    note: str = ""


@dataclass(frozen=True)
class Quantity:
    """One realism check: a name, the range a practitioner expects and how to measure it.

    ``low``/``high`` bound the value (``None``: unbounded on that side); with ``strict`` the
    bounds are exclusive ("above 1", "below 0.5"). ``unit`` sets how the value prints: ``%``
    (a rate printed as a percentage), ``pt`` (percentage points), ``x`` (a ratio or a plain
    number), ``n`` (a count).
    """

    name: str
    expected: str
    low: float | None
    high: float | None
    measure: Callable[[Sequence[Tables]], float | Measurement]
    unit: str = "x"
    strict: bool = False

    def in_range(self, value: float) -> bool:
        if value is None or not math.isfinite(value):
            return False
        if self.strict:
            return (self.low is None or value > self.low) and (
                self.high is None or value < self.high
            )
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def format(self, value: float) -> str:
        if value is None or not math.isfinite(value):
            return "n/a"
        if self.unit == "%":
            pct = 100.0 * value
            return f"{pct:.3f}%" if abs(pct) < 0.1 else f"{pct:.2f}%"
        if self.unit == "pt":
            return f"{value:.2f} pt"
        if self.unit == "n":
            return f"{value:g}"
        return f"{value:.2g}" if 0 < abs(value) < 0.01 else f"{value:.3f}"

    def format_delta(self, delta: float) -> str:
        """A difference of two values (percentage points for rates)."""
        if self.unit == "%":
            pp = 100.0 * delta
            return f"{pp:.3f} pp" if abs(pp) < 0.1 else f"{pp:.2f} pp"
        return self.format(delta)


@dataclass(frozen=True)
class Row:
    """A quantity as measured on some episodes."""

    quantity: Quantity
    value: float
    note: str = ""

    @property
    def in_range(self) -> bool:
        return self.quantity.in_range(self.value)

    @property
    def status(self) -> str:
        q, v = self.quantity, self.value
        if self.in_range:
            return "yes"
        if v is None or not math.isfinite(v):
            return "**no** (not measurable)"
        if v in (q.low, q.high):  # a strict bound reached exactly
            return "**no** (at the bound, which is excluded)"
        if q.low is not None and v < q.low:
            return f"**no** (below by {q.format_delta(q.low - v)})"
        return f"**no** (above by {q.format_delta(v - q.high)})"


# --------------------------------------------------------------------------------------------
# Pooling the episodes' tables


class Pool(list):
    """The episodes' tables, each table stacked once over episodes (with an ``episode`` column,
    and for dated tables ``age``, days before the episode's last day, and ``weekday``)."""

    def __init__(self, episodes: Iterable[Tables]):
        super().__init__(episodes)
        self._stacked: dict[str, pd.DataFrame] = {}

    def has(self, name: str) -> bool:
        return any(name in tables for tables in self)

    def table(self, name: str) -> pd.DataFrame:
        if name not in self._stacked:
            frames = [t[name].assign(episode=i) for i, t in enumerate(self) if name in t]
            if not frames:
                raise MissingTable(f"no episode has a {name} table")
            frame = pd.concat(frames, ignore_index=True)
            if "date" in frame.columns:
                frame["date"] = pd.to_datetime(frame["date"])
                last = frame.groupby("episode")["date"].transform("max")
                frame["age"] = (last - frame["date"]).dt.days
                frame["weekday"] = frame["date"].dt.day_of_week
            if "utm_campaign" in frame.columns and "campaign" not in frame.columns:
                frame = frame.rename(columns={"utm_campaign": "campaign"})
            self._stacked[name] = frame
        return self._stacked[name]

    def perf(self) -> pd.DataFrame:
        return self.table("perf_daily")


def pool(episodes: Sequence[Tables]) -> Pool:
    return episodes if isinstance(episodes, Pool) else Pool(episodes)


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / float(denominator) if denominator > 0 else math.nan


def _rate(frame: pd.DataFrame, numerator: str, denominator: str) -> float:
    return _ratio(frame[numerator].sum(), frame[denominator].sum())


def _is(frame: pd.DataFrame, column: str, values: str | Sequence[str]) -> pd.Series:
    values = [values] if isinstance(values, str) else list(values)
    return frame[column].astype(str).isin(values)


def _campaigns_of_type(p: Pool, kind: str) -> set[str]:
    """Campaign names of a ``campaign_type`` (from the campaigns table)."""
    campaigns = p.table("campaigns")
    return set(
        campaigns.loc[campaigns["campaign_type"].astype(str) == kind, "campaign"].astype(str)
    )


def _display_only(p: Pool) -> set[str]:
    """Campaigns that serve no search network: no perf_daily row on search or search partners."""
    perf = p.perf()
    served = perf.groupby(perf["campaign"].astype(str))["placement"].agg(
        lambda s: bool(s.astype(str).isin(SEARCH_PLACEMENTS).any())
    )
    return set(served.index[~served])


# --------------------------------------------------------------------------------------------
# Funnel rates


def _ctr(campaign: str | None, placement: str, exclude_device: str | None = None):
    def measure(episodes: Sequence[Tables]) -> float:
        perf = pool(episodes).perf()
        mask = _is(perf, "placement", placement)
        if campaign is not None:
            mask &= _is(perf, "campaign", campaign)
        if exclude_device is not None:
            mask &= ~_is(perf, "device", exclude_device)
        return _rate(perf[mask], "clicks", "impressions")

    return measure


def _matured_cvr(campaign: str, placement: str):
    def measure(episodes: Sequence[Tables]) -> float:
        perf = pool(episodes).perf()
        mask = _is(perf, "campaign", campaign) & _is(perf, "placement", placement)
        mask &= perf["age"] >= MATURED_DAYS
        return _rate(perf[mask], "conversions", "clicks")

    return measure


def brand_spend_share(episodes: Sequence[Tables]) -> float:
    """Brand (own-name) search's share of the account's spend."""
    perf = pool(episodes).perf()
    return _ratio(float(perf.loc[_is(perf, "campaign", BRAND), "cost"].sum()), perf["cost"].sum())


def ctv_ctr(episodes: Sequence[Tables]) -> float:
    perf = pool(episodes).perf()
    return _rate(perf[_is(perf, "device", "ctv")], "clicks", "impressions")


def partners_ctr_ratio(episodes: Sequence[Tables]) -> Measurement:
    """Search partners CTR over Google search CTR in the same campaign; the largest over the
    campaigns that serve both."""
    perf = pool(episodes).perf()
    rows = perf[_is(perf, "placement", SEARCH_PLACEMENTS)]
    sums = rows.groupby(
        [rows["campaign"].astype(str), rows["placement"].astype(str)], observed=True
    )[["clicks", "impressions"]].sum()
    ratios = {}
    for campaign in sums.index.get_level_values(0).unique():
        by_placement = sums.loc[campaign]
        if not set(SEARCH_PLACEMENTS) <= set(by_placement.index):
            continue
        search = _rate(by_placement.loc[["search"]], "clicks", "impressions")
        partners = _rate(by_placement.loc[["search_partners"]], "clicks", "impressions")
        if search > 0 and math.isfinite(partners):
            ratios[campaign] = partners / search
    if not ratios:
        return Measurement(math.nan, "no campaign serves both search and search partners")
    worst = max(ratios, key=ratios.get)
    return Measurement(ratios[worst], f"max at {worst}")


# --------------------------------------------------------------------------------------------
# Impression share and auction insights


def brand_is_mean(episodes: Sequence[Tables]) -> float:
    shares = pool(episodes).table("impression_share_daily")
    values = shares.loc[_is(shares, "campaign", BRAND), "search_impression_share"].dropna()
    return float(values.mean()) if len(values) else math.nan


def brand_is_daily_change(episodes: Sequence[Tables]) -> float:
    """Standard deviation of brand search IS from one day to the next, in points."""
    shares = pool(episodes).table("impression_share_daily")
    brand = shares[_is(shares, "campaign", BRAND)].sort_values(["episode", "date"])
    diffs = brand.groupby("episode")["search_impression_share"].diff().dropna()
    return float(100.0 * diffs.std()) if len(diffs) > 1 else math.nan


def display_is_missing(episodes: Sequence[Tables]) -> Measurement:
    """Share of display-only campaigns' impression-share rows whose search IS columns are NaN."""
    p = pool(episodes)
    display = _display_only(p)
    if not display:
        return Measurement(math.nan, "no display-only campaign")
    shares = p.table("impression_share_daily")
    rows = shares[_is(shares, "campaign", sorted(display))]
    if rows.empty:
        return Measurement(1.0, "no rows at all")  # nothing reported: as good as NaN
    columns = [
        c
        for c in ("search_impression_share", "search_lost_is_rank", "search_lost_is_budget")
        if c in rows.columns
    ]
    return Measurement(float(rows[columns].isna().all(axis=1).mean()))


def competitor_jaccard(episodes: Sequence[Tables]) -> Measurement:
    """Largest Jaccard similarity between two campaigns' competitor sets (within an episode)."""
    insights = pool(episodes).table("auction_insights_daily")
    insights = insights[insights["competitor"].astype(str) != YOU]
    best, pair = math.nan, ""
    for _, episode in insights.groupby("episode"):
        sets = {
            str(c): set(g["competitor"].astype(str))
            for c, g in episode.groupby(episode["campaign"].astype(str))
        }
        for (a, sa), (b, sb) in combinations(sorted(sets.items()), 2):
            jaccard = len(sa & sb) / len(sa | sb)
            if not jaccard <= best:  # also replaces the initial NaN
                best, pair = jaccard, f"{a} vs {b}"
    if not math.isfinite(best):
        return Measurement(math.nan, "fewer than two campaigns have auction insights")
    return Measurement(best, pair)


def display_auction_rows(episodes: Sequence[Tables]) -> Measurement:
    """Auction-insights rows of display-only campaigns (a count)."""
    p = pool(episodes)
    display = _display_only(p)
    if not display:
        return Measurement(math.nan, "no display-only campaign")
    insights = p.table("auction_insights_daily")
    return Measurement(float(_is(insights, "campaign", sorted(display)).sum()))


# --------------------------------------------------------------------------------------------
# Reach and frequency


def _frequency(select: Callable[[Pool], set[str]]):
    def measure(episodes: Sequence[Tables]) -> float:
        p = pool(episodes)
        rf = p.table("reach_frequency_daily")
        rows = rf[_is(rf, "campaign", sorted(select(p))) & (rf["reach"] > 0)]
        if rows.empty:
            return math.nan
        return float((rows["impressions"] / rows["reach"]).median())

    return measure


def _search_campaigns(p: Pool) -> set[str]:
    return _campaigns_of_type(p, "search")


def _remarketing_campaigns(p: Pool) -> set[str]:
    return {REMARKETING}


search_frequency = _frequency(_search_campaigns)
remarketing_frequency = _frequency(_remarketing_campaigns)


# --------------------------------------------------------------------------------------------
# Site analytics against the platform


def sessions_per_click(episodes: Sequence[Tables]) -> float:
    p = pool(episodes)
    return _ratio(p.table("site_analytics_daily")["sessions"].sum(), p.perf()["clicks"].sum())


def sessions_per_click_eu_minus_us(episodes: Sequence[Tables]) -> Measurement:
    p = pool(episodes)
    site, perf = p.table("site_analytics_daily"), p.perf()

    def spc(geos):
        return _ratio(
            site.loc[_is(site, "geo", geos), "sessions"].sum(),
            perf.loc[_is(perf, "geo", geos), "clicks"].sum(),
        )

    eu, us = spc(EU_UK_GEOS), spc(US_GEOS)
    return Measurement(eu - us, f"EU/UK {eu:.3f}, US {us:.3f}")


SITE_KEYS = ["episode", "date", "campaign", "device", "browser_os", "geo"]


def _platform_vs_backend(p: Pool) -> pd.DataFrame:
    """Matured platform conversions and backend orders joined at the site grain."""
    perf = p.perf()
    site = p.table("site_analytics_daily")
    perf = perf[perf["age"] >= MATURED_DAYS]
    site = site[site["age"] >= MATURED_DAYS]
    left = perf.groupby(SITE_KEYS, observed=True)["conversions"].sum().reset_index()
    right = site.groupby(SITE_KEYS, observed=True)["backend_orders"].sum().reset_index()
    for frame in (left, right):
        for key in SITE_KEYS[2:]:
            frame[key] = frame[key].astype(str)
    return left.merge(right, on=SITE_KEYS, how="inner")


def platform_over_backend_max(episodes: Sequence[Tables]) -> Measurement:
    """Platform conversions over backend orders per campaign (matured); the largest."""
    joined = _platform_vs_backend(pool(episodes))
    sums = joined.groupby("campaign")[["conversions", "backend_orders"]].sum()
    sums = sums[sums["backend_orders"] > 0]
    if sums.empty:
        return Measurement(math.nan, "no backend orders")
    ratios = sums["conversions"] / sums["backend_orders"]
    return Measurement(float(ratios.max()), f"max at {ratios.idxmax()}")


def platform_over_backend_safari(episodes: Sequence[Tables]) -> float:
    joined = _platform_vs_backend(pool(episodes))
    return _rate(joined[joined["browser_os"].isin(SAFARI)], "conversions", "backend_orders")


# --------------------------------------------------------------------------------------------
# Conversion lag


def _perf_lag_share(p: Pool, age: int) -> float:
    """Share of eventual conversions reported at ``age`` days, estimated from perf_daily: the
    reported CVR of the days that age over the CVR of older days of the same weekday (clicks at
    least ``LAG_REFERENCE_DAYS`` and at least a week older than ``age``)."""
    perf = p.perf()
    reference = perf[perf["age"] >= max(LAG_REFERENCE_DAYS, age + 7)]
    ref = reference.groupby("weekday")[["conversions", "clicks"]].sum()
    ref_cvr = ref["conversions"] / ref["clicks"].where(ref["clicks"] > 0)
    day = perf[perf["age"] == age].groupby("weekday")[["conversions", "clicks"]].sum()
    expected = (day["clicks"] * ref_cvr.reindex(day.index)).sum()
    return _ratio(day["conversions"].sum(), expected)


def _lag_share(age: int):
    def measure(episodes: Sequence[Tables]) -> Measurement:
        p = pool(episodes)
        if not p.has("conversion_lag_curve"):
            return Measurement(
                _perf_lag_share(p, age), "estimated from perf_daily (no conversion_lag_curve)"
            )
        curve = p.table("conversion_lag_curve")
        curve = curve.groupby("days_since_click")["share_reported"].mean()
        known = curve[curve.index <= age]
        if known.empty:
            return Measurement(math.nan, f"curve starts after day {age}")
        note = "" if known.index.max() == age else f"curve ends at day {known.index.max()}"
        return Measurement(float(known.iloc[-1]), note)

    return measure


def last_day_share(episodes: Sequence[Tables]) -> float:
    """The last day's reported CVR in perf_daily over the matured CVR of its weekday."""
    return _perf_lag_share(pool(episodes), 0)


# --------------------------------------------------------------------------------------------
# Weekday, holidays


def _near_holiday(dates: pd.Series, holidays: Sequence[str]) -> pd.Series:
    before, after = HOLIDAY_EXCLUDE
    near = pd.Series(False, index=dates.index)
    for holiday in holidays:
        h = pd.Timestamp(holiday)
        near |= (dates >= h - pd.Timedelta(days=before)) & (dates <= h + pd.Timedelta(days=after))
    return near


def _weekday_frame(p: Pool, holidays: Sequence[str]) -> pd.DataFrame:
    """Matured days away from holidays, summed per episode and date."""
    perf = p.perf()
    rows = perf[perf["age"] >= MATURED_DAYS]
    daily = rows.groupby(["episode", "date", "weekday"])[["clicks", "conversions"]].sum()
    daily = daily.reset_index()
    return daily[~_near_holiday(daily["date"], holidays)]


def weekday_clicks(holidays: Sequence[str]):
    def measure(episodes: Sequence[Tables]) -> Measurement:
        daily = _weekday_frame(pool(episodes), holidays)
        means = daily.groupby("weekday")["clicks"].mean()  # pooled: sum over (episode, date)
        if len(means) < 7:
            return Measurement(math.nan, "fewer than 7 weekdays")
        return Measurement(_ratio(means.max(), means.min()), _weekday_note(means))

    return measure


def weekday_cvr(holidays: Sequence[str]):
    def measure(episodes: Sequence[Tables]) -> Measurement:
        daily = _weekday_frame(pool(episodes), holidays)
        sums = daily.groupby("weekday")[["conversions", "clicks"]].sum()
        cvr = sums["conversions"] / sums["clicks"].where(sums["clicks"] > 0)
        if cvr.notna().sum() < 7:
            return Measurement(math.nan, "fewer than 7 weekdays")
        return Measurement(_ratio(cvr.max(), cvr.min()), _weekday_note(cvr))

    return measure


def _weekday_note(values: pd.Series) -> str:
    names = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    return f"max {names[int(values.idxmax())]}, min {names[int(values.idxmin())]}"


def _clicks_by_date(p: Pool) -> dict[int, pd.Series]:
    perf = p.perf()
    daily = perf.groupby(["episode", "date"])["clicks"].sum()
    return {int(e): s.droplevel(0) for e, s in daily.groupby(level=0)}


def holiday_ramp(holidays: Sequence[str]):
    """Clicks over the 3-7 days before each holiday over the same days two weeks earlier."""

    def measure(episodes: Sequence[Tables]) -> Measurement:
        ramp_total = earlier_total = 0.0
        used = set()
        for clicks in _clicks_by_date(pool(episodes)).values():
            for holiday in holidays:
                h = pd.Timestamp(holiday)
                ramp = [h - pd.Timedelta(days=k) for k in range(3, 8)]
                earlier = [d - pd.Timedelta(days=14) for d in ramp]
                if all(d in clicks.index for d in ramp + earlier):
                    ramp_total += clicks.loc[ramp].sum()
                    earlier_total += clicks.loc[earlier].sum()
                    used.add(holiday)
        if not used:
            return Measurement(math.nan, "no holiday with its ramp inside the panel")
        return Measurement(_ratio(ramp_total, earlier_total), ", ".join(sorted(used)))

    return measure


def holiday_day(holidays: Sequence[str]):
    """Clicks on each holiday over the day before."""

    def measure(episodes: Sequence[Tables]) -> Measurement:
        day_total = before_total = 0.0
        used = set()
        for clicks in _clicks_by_date(pool(episodes)).values():
            for holiday in holidays:
                h = pd.Timestamp(holiday)
                if h in clicks.index and h - pd.Timedelta(days=1) in clicks.index:
                    day_total += clicks.loc[h]
                    before_total += clicks.loc[h - pd.Timedelta(days=1)]
                    used.add(holiday)
        if not used:
            return Measurement(math.nan, "no holiday inside the panel")
        return Measurement(_ratio(day_total, before_total), ", ".join(sorted(used)))

    return measure


# --------------------------------------------------------------------------------------------
# Budgets and pacing


def pacing_late_share_ratio(episodes: Sequence[Tables]) -> Measurement:
    """Share of a day's impressions served from 18:00 on budget-limited days over that share on
    the other days, per campaign and device (pooled over days and episodes); the smallest."""
    p = pool(episodes)
    hourly = p.table("perf_hourly")
    shares = p.table("impression_share_daily")
    keys = ["episode", "date", "campaign"]
    daily = (
        hourly.assign(late=hourly["impressions"].where(hourly["hour"] >= LATE_HOUR, 0))
        .groupby([*keys, "device"], observed=True)[["impressions", "late"]]
        .sum()
        .reset_index()
    )
    lost = shares[[*keys, "search_lost_is_budget"]].copy()
    for frame in (daily, lost):
        frame["campaign"] = frame["campaign"].astype(str)
    daily["device"] = daily["device"].astype(str)
    joined = daily.merge(lost, on=keys, how="inner").dropna(subset=["search_lost_is_budget"])
    joined["limited"] = joined["search_lost_is_budget"] > LIMITED_LOST_IS
    sums = joined.groupby(["campaign", "device", "limited"])[["late", "impressions"]].sum()
    ratios = {}
    for (campaign, device), group in sums.groupby(level=[0, 1]):
        group = group.droplevel([0, 1])
        if not {True, False} <= set(group.index):
            continue
        if min(group.loc[True, "impressions"], group.loc[False, "impressions"]) < 100:
            continue
        unlimited = _ratio(group.loc[False, "late"], group.loc[False, "impressions"])
        limited = _ratio(group.loc[True, "late"], group.loc[True, "impressions"])
        if unlimited > 0:
            ratios[(campaign, device)] = limited / unlimited
    if not ratios:
        return Measurement(math.nan, "no budget-limited campaign-days in the hourly window")
    worst = min(ratios, key=ratios.get)
    return Measurement(ratios[worst], f"min at {worst[0]}/{worst[1]}, {len(ratios)} groups")


def is_identity_residual(episodes: Sequence[Tables]) -> float:
    """Largest |IS + lost IS (rank) + lost IS (budget) - 1| over campaign-days that report IS."""
    shares = pool(episodes).table("impression_share_daily")
    parts = shares[["search_impression_share", "search_lost_is_rank", "search_lost_is_budget"]]
    parts = parts.dropna()
    if parts.empty:
        return math.nan
    return float((parts.sum(axis=1) - 1.0).abs().max())


def daily_budgets(campaigns: pd.DataFrame, changes: pd.DataFrame | None, dates) -> pd.DataFrame:
    """The daily budget in effect on each date, per campaign, from the current budget and the
    budget edits of the change history (the old value of the first edit after the date). Dates
    with a budget edit of the campaign are left out (two budgets on one day)."""
    edits = pd.DataFrame(columns=["campaign", "day", "old"])
    if changes is not None and len(changes) and "field" in changes.columns:
        budget_edits = changes[changes["field"].astype(str) == "daily_budget"]
        edits = pd.DataFrame(
            {
                "campaign": budget_edits["campaign"].astype(str),
                "day": pd.to_datetime(budget_edits["change_time"]).dt.normalize(),
                "time": pd.to_datetime(budget_edits["change_time"]),
                "old": pd.to_numeric(budget_edits["old_value"], errors="coerce"),
            }
        ).sort_values("time")
    rows = []
    for campaign, current in zip(campaigns["campaign"].astype(str), campaigns["daily_budget"]):
        mine = edits[edits["campaign"] == campaign]
        for date in pd.to_datetime(pd.Series(dates)):
            if (mine["day"] == date).any():
                continue
            later = mine[mine["day"] > date]
            budget = later["old"].iloc[0] if len(later) else current
            rows.append((campaign, date, float(budget)))
    return pd.DataFrame(rows, columns=["campaign", "date", "budget"])


def _spend_and_budget(p: Pool) -> pd.DataFrame:
    """Campaign-days of the change history's window (the days whose budget the history shows)
    with their cost and the daily budget in force, over every episode with a campaigns table;
    days with a budget edit of the campaign are left out (two budgets on one day)."""
    columns = ["episode", "campaign", "date", "cost", "budget"]
    perf = p.perf()
    frames = []
    for episode, tables in enumerate(p):
        if "campaigns" not in tables or "daily_budget" not in tables["campaigns"].columns:
            continue
        rows = perf[(perf["episode"] == episode) & (perf["age"] < CHANGE_HISTORY_DAYS - 1)]
        cost = rows.groupby([rows["campaign"].astype(str), "date"])["cost"].sum()
        cost = cost.rename_axis(["campaign", "date"]).reset_index()
        budgets = daily_budgets(
            tables["campaigns"], tables.get("change_history"), sorted(rows["date"].unique())
        )
        joined = cost.merge(budgets, on=["campaign", "date"])
        frames.append(joined[joined["budget"] > 0].assign(episode=episode)[columns])
    if not frames:
        raise MissingTable("no episode has a campaigns table with budgets")
    return pd.concat(frames, ignore_index=True)


def spend_over_budget(episodes: Sequence[Tables]) -> Measurement:
    """Largest campaign-day cost over the daily budget in effect (the change history's window)."""
    spend = _spend_and_budget(pool(episodes))
    if spend.empty:
        return Measurement(math.nan, "no campaign-day with a known budget")
    ratio = spend["cost"] / spend["budget"]
    return Measurement(float(ratio.max()), f"max at {spend['campaign'].iloc[int(ratio.argmax())]}")


def days_over_twice_budget(episodes: Sequence[Tables]) -> Measurement:
    """Campaign-days spending more than ``DAY_CAP`` x the daily budget in force (a count)."""
    spend = _spend_and_budget(pool(episodes))
    over = spend[spend["cost"] > DAY_CAP * spend["budget"]]
    return Measurement(float(len(over)), f"of {len(spend)} campaign-days")


def months_over_budget(episodes: Sequence[Tables]) -> Measurement:
    """Campaign-months over budget (a count): per episode and campaign, the change history's
    window (about a month, the days whose budget is known) whose total cost exceeds the total
    of the budgets in force on those days (the platform's monthly limit: 30.4 x the average
    daily budget)."""
    spend = _spend_and_budget(pool(episodes))
    months = spend.groupby(["episode", "campaign"])[["cost", "budget"]].sum()
    months = months[months["budget"] > 0]
    if months.empty:
        return Measurement(math.nan, "no campaign-month with a known budget")
    ratio = months["cost"] / months["budget"]
    where = ratio.idxmax()
    return Measurement(
        float((ratio > 1.0).sum()),
        f"of {len(months)}; max {ratio.max():.3f} of budget at {where[1]}",
    )


# --------------------------------------------------------------------------------------------
# Physics rules (issue 39 item 4): an edit's effect starts at its timestamp, a campaign held by
# its budget loses impression share to budget, creative fatigue builds with frequency, and the
# alert's numbers reproduce from the baseline the prompt states.

PROMPT = "prompt"  # the episode's prompt as a one-row table (column ``text``), when known
# Change-history fields whose edit changes delivery, bids, conversions or the account's state:
# what an analyst suspects. Ad text, URL suffixes, a schedule that keeps every hour, negative
# keywords and observed (not targeted) audience segments change none of it.
EFFECTFUL_FIELDS = frozenset(
    {
        "daily_budget",
        "bid_adjustment",
        "target_cpa",
        "target_roas",
        "status",
        "account_status",
        "location",
        "location_options",
        "audience_setting",
        "optimized_targeting",
        "final_url_expansion",
        "promotion",
        "enhanced_conversions",
        "search_themes",
    }
)
HOURLY_METRICS = ("impressions", "clicks", "cost")
DEPARTURE_Z = 3.0  # a slice's hours depart from their baseline beyond this |z|
MIN_BASELINE_DAYS = 3  # days of the hourly window before the tested day, at least
DAY_CAP = 2.0  # Google may spend up to twice the daily budget on a day
CUTOFF_EVENING = (18, 21)  # hours whose traffic shows the campaign was serving in the evening
CUTOFF_MIN_EVENING = 200  # impressions in them: an empty 23:00 is then a stop, not chance
FATIGUE_FALL = 0.3  # a creative's weekly CTR falls by at least this share ...
FATIGUE_DAYS = 7  # ... from one week (this many days) to the next
FATIGUE_ALPHA = 0.05  # family-wise false-fall rate over all the week-on-week comparisons
# Fatigue wears out the same audience: it does not change how many impressions a creative gets
# on a placement. A fall that comes with this much more or less volume (later week over the
# earlier) is an audience expansion, a placement shift, a budget or a pause, not fatigue.
FATIGUE_STEADY_VOLUME = (0.8, 1.25)
FREQUENCY_GROWTH = 0.1  # fatigue needs the creative's daily frequency to grow at least this much
CURVE_DECIMALS = 4  # conversion_lag_curve's share_reported is rounded to 4 decimals


def _effectful_edits(changes: pd.DataFrame) -> pd.DataFrame:
    """The change-history rows of effectful fields with their slice at the hourly grain
    (campaign, or the account when empty; a device when the target names one), day and hour
    (and episode, for a pooled table)."""
    rows = changes[changes["field"].astype(str).isin(EFFECTFUL_FIELDS)]
    time = pd.to_datetime(rows["change_time"])
    target = rows["target"].astype(str)
    device = target.str.extract(r"(?:^|&)device=([^&]+)", expand=False)
    out = pd.DataFrame(
        {
            "campaign": rows["campaign"].fillna("").astype(str),
            "device": device,
            "day": time.dt.normalize(),
            "hour": time.dt.hour,
        }
    )
    if "episode" in rows.columns:
        out.insert(0, "episode", rows["episode"])
    return out.reset_index(drop=True)


def _departs(before: pd.DataFrame, day: pd.Timestamp) -> bool | None:
    """Whether ``day``'s row of ``before`` (per-day sums of the hours before the edit's) is
    beyond ``DEPARTURE_Z`` from the earlier days' mean in any metric; None when ``day`` is not
    in the window or has fewer than ``MIN_BASELINE_DAYS`` days before it."""
    if day not in before.index:
        return None
    base = before[before.index < day]
    if len(base) < MIN_BASELINE_DAYS:
        return None
    sd = base.std(ddof=1)
    z = (before.loc[day] - base.mean()) / sd.where(sd > 0)
    return bool((z.abs() > DEPARTURE_Z).any())


def edit_timing(episodes: Sequence[Tables]) -> Measurement:
    """Effects start at the edit: for every effectful edit with a timestamp hour h in the
    hourly window, whether the edited slice's hours before h (impressions, clicks, cost of
    perf_hourly at the campaign, or campaign x device, grain) depart from the same hours of
    the earlier days (|z| > 3) on the edit day; the value is that share minus the same share
    the day before the edit (about 0 where the hours before an edit look like the day before)."""
    p = pool(episodes)
    hourly, changes = p.table("perf_hourly"), p.table("change_history")
    hourly = hourly.assign(campaign=hourly["campaign"].astype(str))
    hourly["device"] = hourly["device"].astype(str)
    found = {0: [0, 0], 1: [0, 0]}  # days before the edit day: [departures, edits measured]
    edits = _effectful_edits(changes)
    edits = edits[edits["hour"] > 0]  # no hour before a midnight edit
    for episode, rows in hourly.groupby("episode"):
        for edit in edits[edits["episode"] == episode].itertuples():
            sel = rows[rows["hour"] < edit.hour]
            if edit.campaign:
                sel = sel[sel["campaign"] == edit.campaign]
            if isinstance(edit.device, str):
                sel = sel[sel["device"] == edit.device]
            before = sel.groupby("date")[list(HOURLY_METRICS)].sum()
            for lag in found:
                departs = _departs(before, edit.day - pd.Timedelta(days=lag))
                if departs is not None:
                    found[lag][0] += departs
                    found[lag][1] += 1
    (on_day, n_day), (before_day, n_before) = found[0], found[1]
    if not n_day or not n_before:
        return Measurement(math.nan, "no effectful edit with earlier days in the hourly window")
    return Measurement(
        on_day / n_day - before_day / n_before,
        f"edit day {on_day}/{n_day}, the day before {before_day}/{n_before}",
    )


def _anti_join(left: pd.DataFrame, right: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """The rows of ``left`` whose ``on`` values are in no row of ``right``."""
    found = pd.MultiIndex.from_frame(left[on]).isin(pd.MultiIndex.from_frame(right[on]))
    return left[~found]


def _hourly_cutoff_days(p: Pool) -> pd.DataFrame:
    """Campaign-days of perf_hourly where serving stopped before the day ended: no impression
    at 23:00 although the evening (``CUTOFF_EVENING``) served at least ``CUTOFF_MIN_EVENING``
    (a budget that ran out; days with an effectful edit of the campaign or the account are
    left out: a pause stops serving too)."""
    keys = ["episode", "campaign", "date"]
    hourly = p.table("perf_hourly")
    hour = hourly["hour"]
    lo, hi = CUTOFF_EVENING
    daily = (
        hourly.assign(
            campaign=hourly["campaign"].astype(str),
            evening=hourly["impressions"].where((hour >= lo) & (hour <= hi), 0),
            late=hourly["impressions"].where(hour == 23, 0),
        )
        .groupby(keys)[["evening", "late"]]
        .sum()
        .reset_index()
    )
    cut = daily.loc[(daily["late"] == 0) & (daily["evening"] >= CUTOFF_MIN_EVENING), keys]
    if not p.has("change_history"):
        return cut
    edits = _effectful_edits(p.table("change_history")).rename(columns={"day": "date"})
    cut = _anti_join(cut, edits[edits["campaign"] != ""], keys)
    return _anti_join(cut, edits[edits["campaign"] == ""], ["episode", "date"])


def lost_is_when_budget_binds(episodes: Sequence[Tables]) -> Measurement:
    """Share of budget-bound campaign-days (cost at least the daily budget in force, or serving
    stopped before midnight in perf_hourly) whose search impression share lost to budget is
    above 0; campaign-days without search impression share (display-only campaigns) are left
    out."""
    p = pool(episodes)
    keys = ["episode", "campaign", "date"]
    spend = _spend_and_budget(p)
    by_spend = spend.loc[spend["cost"] >= spend["budget"], keys]
    by_cutoff = _hourly_cutoff_days(p) if p.has("perf_hourly") else by_spend.iloc[:0]
    bound = pd.concat([by_spend, by_cutoff], ignore_index=True).drop_duplicates()
    shares = p.table("impression_share_daily")
    shares = shares.assign(campaign=shares["campaign"].astype(str))
    joined = bound.merge(shares[[*keys, "search_lost_is_budget"]], on=keys, how="inner")
    joined = joined.dropna(subset=["search_lost_is_budget"])
    if joined.empty:
        return Measurement(math.nan, "no budget-bound campaign-day with search impression share")
    held = int((joined["search_lost_is_budget"] > 0).sum())
    return Measurement(
        held / len(joined),
        f"{held} of {len(joined)} campaign-days ({len(by_spend)} at or over budget, "
        f"{len(by_cutoff)} cut off in perf_hourly)",
    )


def _weekly_ctr_falls(perf: pd.DataFrame) -> tuple[pd.DataFrame, int, int, int]:
    """Week-on-week CTR comparisons per (episode, campaign, creative, placement): every day t
    with both the week ending t and the week ending t - ``FATIGUE_DAYS`` inside the episode,
    the summed clicks and impressions of the two weeks compared. Returns the deepest
    fatigue-like fall per series (``FATIGUE_FALL`` or more, significant, steady volume) with
    its end age, fall, volume ratio and z; and three counts: the comparisons tested, the series
    with a significant fall of ``FATIGUE_FALL`` or more, and of those the series whose every
    such fall changed volume."""
    keys = ["episode", "campaign", "creative", "placement"]
    daily = perf.groupby([*keys, "age"], observed=True)[["clicks", "impressions"]].sum()
    daily = daily.reset_index()
    for key in keys[1:]:
        daily[key] = daily[key].astype(str)
    # Columns run over days before the episode's last day (oldest first), so that episodes of
    # different dates line up; a day a series did not serve counts as 0 impressions.
    grid = daily.set_index([*keys, "age"])[["clicks", "impressions"]].unstack("age")
    ages = np.arange(int(daily["age"].max()), -1, -1)
    clicks = grid["clicks"].reindex(columns=ages).fillna(0.0).to_numpy(dtype=float)
    impressions = grid["impressions"].reindex(columns=ages).fillna(0.0).to_numpy(dtype=float)
    n_days = len(ages)
    series = grid.index.to_frame(index=False)
    w = FATIGUE_DAYS
    if n_days < 2 * w:
        return series.iloc[:0], 0, 0, 0

    def week(values: np.ndarray) -> np.ndarray:
        """Sums over the ``w`` days ending on each day from day ``w - 1`` on."""
        total = np.concatenate([np.zeros((len(values), 1)), values.cumsum(axis=1)], axis=1)
        return total[:, w:] - total[:, :-w]

    c_week, n_week = week(clicks), week(impressions)
    c1, n1 = c_week[:, w:], n_week[:, w:]  # the week ending t (t = 2w - 1 .. n_days - 1)
    c0, n0 = c_week[:, :-w], n_week[:, :-w]  # the week ending t - w
    end_age = ages[2 * w - 1 :]
    # Both weeks inside the episode: the episode spans at least end age + 2w - 1 days back.
    span = perf.groupby("episode")["age"].max().reindex(series["episode"]).to_numpy()
    tested = (end_age[None, :] + 2 * w - 1 <= span[:, None]) & (n0 > 0) & (n1 > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p0, p1 = c0 / n0, c1 / n1
        ratio = p1 / p0
        volume = n1 / n0
        # One-sided two-proportion z-test of "the later week's CTR is lower", pooled variance.
        pooled = (c0 + c1) / (n0 + n1)
        z = (p0 - p1) / np.sqrt(pooled * (1.0 - pooled) * (1.0 / n0 + 1.0 / n1))
    m = int(tested.sum())
    if m == 0:
        return series.iloc[:0], 0, 0, 0
    # Bonferroni: m comparisons (every series x day tested; overlapping weeks make them
    # correlated, which only makes the bound conservative), each at alpha / m, keep the
    # chance of any false fall over the whole table below FATIGUE_ALPHA; daily CTR at a few
    # thousand impressions is noise-dominated, and the deepest of many noisy ratios is a
    # fall by selection alone without it.
    z_crit = float(norm.isf(FATIGUE_ALPHA / m))
    fell = tested & (ratio <= 1.0 - FATIGUE_FALL) & (z >= z_crit)
    low, high = FATIGUE_STEADY_VOLUME
    steady = fell & (volume >= low) & (volume <= high)
    depth = np.where(steady, ratio, np.inf)
    deepest = depth.argmin(axis=1)
    rows = np.flatnonzero(np.isfinite(depth[np.arange(len(depth)), deepest]))
    cols = deepest[rows]
    falls = series.iloc[rows].reset_index(drop=True)
    falls["age"] = end_age[cols]
    falls["fall"] = 1.0 - ratio[rows, cols]
    falls["volume"] = volume[rows, cols]
    falls["z"] = z[rows, cols]
    any_fell, any_steady = fell.any(axis=1), steady.any(axis=1)
    return falls, m, int(any_fell.sum()), int((any_fell & ~any_steady).sum())


def fatigue_without_frequency(episodes: Sequence[Tables]) -> Measurement:
    """Creative fatigue is a frequency effect: of the creatives' fatigue-like CTR falls, the
    share whose frequency (reach_frequency_daily) grew less than ``FREQUENCY_GROWTH``.

    A fatigue-like fall is the later of two consecutive weeks (``FATIGUE_DAYS`` days each) of a
    creative on one placement with a summed CTR at most ``1 - FATIGUE_FALL`` of the earlier
    week's, significant by a one-sided two-proportion z-test at a Bonferroni threshold over
    all the comparisons (daily CTR is mostly binomial noise), with the impressions of the two
    weeks within ``FATIGUE_STEADY_VOLUME`` (an audience expansion or a placement shift lowers
    CTR by adding or moving impressions: no fatigue); the deepest per series. Read per
    placement, a mix shift between placements is no fall. Frequency growth is the
    impressions-weighted mean daily frequency of the creative (all placements: the table is
    per campaign and creative) over the later week over the earlier week, minus 1. 0 when no
    CTR falls so; NaN when no fall has a frequency."""
    p = pool(episodes)
    perf, rf = p.perf(), p.table("reach_frequency_daily")
    falls, m, n_fell, n_volume = _weekly_ctr_falls(perf)
    if m == 0:
        return Measurement(math.nan, "no series with two full weeks of impressions")
    counted = (
        f"{m} week-on-week comparisons, {n_fell} series with a significant fall of "
        f"{FATIGUE_FALL:.0%} or more, {n_volume} of them only with a change of volume"
    )
    if falls.empty:
        return Measurement(0.0, f"no fatigue-like CTR fall ({counted})")
    # The two weeks' dates of each fall, and the creative's frequency on them.
    last = perf.groupby("episode")["date"].max()
    falls["end"] = last.reindex(falls["episode"]).to_numpy() - pd.to_timedelta(
        falls["age"], unit="D"
    )
    offsets = np.arange(2 * FATIGUE_DAYS)
    days = falls.loc[np.repeat(falls.index, len(offsets)), ["episode", "campaign", "creative"]]
    days["fall_id"] = np.repeat(falls.index, len(offsets))
    days["later"] = np.tile(offsets < FATIGUE_DAYS, len(falls))
    days["date"] = np.repeat(falls["end"].to_numpy(), len(offsets)) - pd.to_timedelta(
        np.tile(offsets, len(falls)), unit="D"
    )
    rf = rf.assign(
        campaign=rf["campaign"].astype(str),
        creative=rf["creative"].astype(str),
        weighted=rf["impressions"] * rf["frequency"],
    )
    joined = days.merge(
        rf[["episode", "campaign", "creative", "date", "impressions", "weighted"]],
        on=["episode", "campaign", "creative", "date"],
        how="inner",
    )
    sums = joined.groupby(["fall_id", "later"])[["weighted", "impressions"]].sum()
    mean = (sums["weighted"] / sums["impressions"].where(sums["impressions"] > 0)).unstack()
    mean = mean.reindex(index=falls.index, columns=[False, True])
    growth = (mean[True] / mean[False] - 1.0).to_numpy(dtype=float)
    known = np.isfinite(growth)
    if not known.any():
        return Measurement(math.nan, f"{len(falls)} fatigue-like CTR falls, none with a frequency")
    flat = int((growth[known] < FREQUENCY_GROWTH).sum())
    deepest = falls.loc[falls["fall"].idxmax()]
    return Measurement(
        flat / int(known.sum()),
        f"{flat} of {int(known.sum())} fatigue-like falls with flat frequency; deepest "
        f"{deepest['fall']:.0%} ({deepest['campaign']}/{deepest['creative']}/"
        f"{deepest['placement']}, week to {deepest['end'].date()}); {counted}",
    )


ALERT_LINE = re.compile(
    r"^ALERT: (?P<kpi>\w+) for (?:the account|campaign (?P<campaign>\S+)) is (?:up|down) "
    r"[\d.,]+%: (?P<current>-?[\d,]+\.\d+) over (?P<c0>\d{4}-\d{2}-\d{2}) to "
    r"(?P<c1>\d{4}-\d{2}-\d{2}) against (?P<baseline>-?[\d,]+\.\d+) for the same weekdays "
    r"on average over (?P<b0>\d{4}-\d{2}-\d{2}) to (?P<b1>\d{4}-\d{2}-\d{2})(?P<rest>.*)$",
    re.MULTILINE,
)
ISO_DATE = r"\d{4}-\d{2}-\d{2}"
DATE_RUN = re.compile(rf"({ISO_DATE})(?:\s*(?:\.\.|to|through)\s*({ISO_DATE}))?")
# KPI -> (numerator, denominator or None): the KPIs the prompt names (their definitions, not
# the monitor's computation, come from domains/ads/alert.py).
ALERT_KPIS = {kpi: (num, den) for kpi, (num, den, _) in MONITOR_KPIS.items()}
ALERT_SQL = """
WITH daily AS (
    SELECT CAST(date AS DATE) AS day,
           SUM(clicks)::DOUBLE AS clicks, SUM(cost)::DOUBLE AS cost,
           SUM(conversions)::DOUBLE AS conversions,
           SUM(conversion_value)::DOUBLE AS conversion_value
    FROM perf
    WHERE episode = $episode
      AND ($campaign::VARCHAR IS NULL OR CAST(campaign AS VARCHAR) = $campaign::VARCHAR)
    GROUP BY 1
), last_day AS (
    SELECT MAX(CAST(date AS DATE)) AS last FROM perf WHERE episode = $episode
), curve_of AS (
    SELECT days_since_click AS age, share_reported AS share FROM curve WHERE episode = $episode
), adjusted AS (
    SELECT d.day, d.clicks, d.cost,
           d.conversions / c.share AS conversions,
           d.conversion_value / c.share AS conversion_value,
           c.share
    FROM daily d CROSS JOIN last_day l
    JOIN curve_of c
      ON c.age = LEAST(date_diff('day', d.day, l.last), (SELECT MAX(age) FROM curve_of))
), current_window AS (
    SELECT SUM(clicks) AS clicks, SUM(cost) AS cost, SUM(conversions) AS conversions,
           SUM(conversion_value) AS conversion_value, MIN(share) AS share
    FROM adjusted WHERE day BETWEEN $c0::DATE AND $c1::DATE
), baseline_days AS (
    SELECT *, dayofweek(day) AS weekday, NOT list_contains($excluded::DATE[], day) AS kept
    FROM adjusted WHERE day BETWEEN $b0::DATE AND $b1::DATE
), by_weekday AS (
    SELECT weekday,
           CASE WHEN bool_or(kept) THEN avg(clicks) FILTER (WHERE kept) ELSE avg(clicks) END
               AS clicks,
           CASE WHEN bool_or(kept) THEN avg(cost) FILTER (WHERE kept) ELSE avg(cost) END AS cost,
           CASE WHEN bool_or(kept) THEN avg(conversions) FILTER (WHERE kept)
                ELSE avg(conversions) END AS conversions,
           CASE WHEN bool_or(kept) THEN avg(conversion_value) FILTER (WHERE kept)
                ELSE avg(conversion_value) END AS conversion_value,
           MIN(share) AS share
    FROM baseline_days GROUP BY weekday
)
SELECT 'current' AS part, clicks, cost, conversions, conversion_value, share FROM current_window
UNION ALL
SELECT 'baseline', SUM(clicks), SUM(cost), SUM(conversions), SUM(conversion_value), MIN(share)
FROM by_weekday
"""


def stated_exclusions(alert_line: str) -> list[pd.Timestamp]:
    """The baseline days an ALERT line says it left out: the dates and runs of dates
    (``first..last``) after "leaving out" (none when the line names none: a rule that says
    only "leaving out the holiday season" states no day)."""
    _, found, clause = alert_line.partition("leaving out")
    days: list[pd.Timestamp] = []
    for first, last in DATE_RUN.findall(clause) if found else ():
        days.extend(pd.date_range(first, last or first))
    return days


def _kpi_value(sums: Mapping[str, float], kpi: str) -> float:
    num, den = ALERT_KPIS[kpi]
    if den is None:
        return float(sums[num])
    return float(sums[num]) / float(sums[den]) if sums[den] > 0 else 0.0


def _printed_tolerance(kpi: str, value: float, share: float) -> float:
    """Half a cent, plus for conversion-based KPIs what the curve's rounding to
    ``CURVE_DECIMALS`` decimals can move the value by (relative half a unit of the last decimal
    over the smallest share used; twice for a ratio whose numerator and denominator both
    divide by it)."""
    num, den = ALERT_KPIS[kpi]
    lagged = (num in MONITOR_LAGGED) + (den in MONITOR_LAGGED)
    relative = lagged * 0.5 * 10.0**-CURVE_DECIMALS / share if lagged and share > 0 else 0.0
    return 0.005 + 1e-9 * abs(value) + relative * abs(value)


def alert_reproduces(episodes: Sequence[Tables]) -> Measurement:
    """Share of episodes whose paged alerts' printed numbers (current and baseline of every
    ALERT line) reproduce from perf_daily and conversion_lag_curve with the windows and the
    left-out days the line states, computed in DuckDB (independently of
    ``domains/ads/alert.py``): per weekday the mean over the baseline weeks' kept days,
    conversions divided by the curve's share at each day's age."""
    import duckdb

    p = pool(episodes)
    if not p.has(PROMPT):
        return Measurement(math.nan, "no prompts (build the episodes with their prompts)")
    prompts = p.table(PROMPT)
    con = duckdb.connect()
    con.register("perf", p.perf()[["episode", "date", "campaign", *MONITOR_TOTALS]])
    con.register("curve", p.table("conversion_lag_curve"))
    reproduced = lines_ok = lines = episodes_with_alerts = 0
    for episode, text in zip(prompts["episode"], prompts["text"]):
        matches = list(ALERT_LINE.finditer(str(text)))
        if not matches:
            continue
        episodes_with_alerts += 1
        ok = True
        for match in matches:
            excluded = [d.date() for d in stated_exclusions(match["rest"])]
            params = {
                "episode": int(episode),
                "campaign": match["campaign"],
                "c0": match["c0"],
                "c1": match["c1"],
                "b0": match["b0"],
                "b1": match["b1"],
                "excluded": excluded,
            }
            parts = con.execute(ALERT_SQL, params).df().set_index("part")
            kpi = match["kpi"]
            line_ok = True
            for part, printed in (("current", match["current"]), ("baseline", match["baseline"])):
                sums = parts.loc[part]
                value = _kpi_value(sums, kpi)
                printed_value = float(printed.replace(",", ""))
                tolerance = _printed_tolerance(kpi, printed_value, float(sums["share"]))
                line_ok &= abs(value - printed_value) <= tolerance
            lines += 1
            lines_ok += line_ok
            ok &= line_ok
        reproduced += ok
    con.close()
    if not episodes_with_alerts:
        return Measurement(math.nan, "no prompt with an ALERT line")
    return Measurement(
        reproduced / episodes_with_alerts,
        f"{reproduced} of {episodes_with_alerts} episodes, {lines_ok} of {lines} alert lines",
    )


# --------------------------------------------------------------------------------------------
# The table


def make_quantities(holidays: Sequence[str] | None = None) -> list[Quantity]:
    """The realism checks; ``holidays`` are the account's holidays (default: the config's)."""
    holidays = tuple(_default_holidays() if holidays is None else holidays)
    return [
        Quantity("brand search CTR", "10-30%", 0.10, 0.30, _ctr(BRAND, "search"), "%"),
        Quantity(
            "brand search CVR (matured)", "8-15%", 0.08, 0.15, _matured_cvr(BRAND, "search"), "%"
        ),
        Quantity("generic search CTR", "3-7%", 0.03, 0.07, _ctr(GENERIC, "search"), "%"),
        Quantity(
            "brand search share of spend",
            "10-35% (non-brand dominates)",
            0.10,
            0.35,
            brand_spend_share,
            "%",
        ),
        Quantity(
            "generic search CVR (matured)",
            "2-5%",
            0.02,
            0.05,
            _matured_cvr(GENERIC, "search"),
            "%",
        ),
        Quantity(
            "search partners CTR / search CTR, same campaign (max)",
            "well under half: < 0.5",
            None,
            0.5,
            partners_ctr_ratio,
            strict=True,
        ),
        Quantity(
            "display CTR (all campaigns)", "0.3-0.8%", 0.003, 0.008, _ctr(None, "display"), "%"
        ),
        Quantity(
            "remarketing display CVR (matured)",
            "0.5-1.5%",
            0.005,
            0.015,
            _matured_cvr(REMARKETING, "display"),
            "%",
        ),
        Quantity(
            "video CTR (non-CTV devices)",
            "0.3-1%",
            0.003,
            0.01,
            _ctr(None, "video", exclude_device="ctv"),
            "%",
        ),
        Quantity("CTV CTR", "essentially 0: < 0.05%", None, 0.0005, ctv_ctr, "%", strict=True),
        Quantity("brand search impression share (mean)", "85-95%", 0.85, 0.95, brand_is_mean, "%"),
        Quantity(
            "brand search IS day-to-day change (sd)",
            "a few points: 0.5-5 pt",
            0.5,
            5.0,
            brand_is_daily_change,
            "pt",
        ),
        Quantity(
            "display-only campaigns: share of IS rows without search IS",
            "1 (no search IS)",
            1.0,
            1.0,
            display_is_missing,
        ),
        Quantity(
            "auction insights: max Jaccard of two campaigns' competitor sets",
            "< 1 (sets differ)",
            None,
            1.0,
            competitor_jaccard,
            strict=True,
        ),
        Quantity(
            "auction insights rows of display-only campaigns",
            "0 (none for display)",
            0.0,
            0.0,
            display_auction_rows,
            "n",
        ),
        Quantity(
            "daily frequency, search creatives (median)", "1.1-1.3", 1.1, 1.3, search_frequency
        ),
        Quantity(
            "daily frequency, remarketing creatives (median)",
            "2-5",
            2.0,
            5.0,
            remarketing_frequency,
        ),
        Quantity("sessions per click", "0.7-0.9", 0.7, 0.9, sessions_per_click),
        Quantity(
            "sessions per click, EU/UK minus US",
            "< 0 (consent)",
            None,
            0.0,
            sessions_per_click_eu_minus_us,
            strict=True,
        ),
        Quantity(
            "platform conversions / backend orders, by campaign (max, matured)",
            "> 1 somewhere (modelled, cross-device)",
            1.0,
            None,
            platform_over_backend_max,
            strict=True,
        ),
        Quantity(
            "platform conversions / backend orders on Safari (matured)",
            "< 1 (tracking prevention)",
            None,
            1.0,
            platform_over_backend_safari,
            strict=True,
        ),
        Quantity(
            "conversion lag: share reported on day 0",
            "about half: 0.35-0.65",
            0.35,
            0.65,
            _lag_share(0),
        ),
        Quantity(
            "conversion lag: share reported by day 14",
            "tail of 2-4 weeks: < 0.97",
            None,
            0.97,
            _lag_share(14),
            strict=True,
        ),
        Quantity("conversion lag: share reported by day 28", ">= 0.95", 0.95, None, _lag_share(28)),
        Quantity(
            "last day's reported CVR / matured CVR of its weekday (perf_daily)",
            "partial, about half: 0.35-0.65",
            0.35,
            0.65,
            last_day_share,
        ),
        Quantity(
            "weekday: clicks, max/min of weekday means",
            ">= 1.1",
            1.1,
            None,
            weekday_clicks(holidays),
        ),
        Quantity("weekday: matured CVR, max/min", ">= 1.05", 1.05, None, weekday_cvr(holidays)),
        Quantity(
            "holiday: clicks 3-7 days before / same days 2 weeks earlier",
            "> 1.05 (gift demand ramps up)",
            1.05,
            None,
            holiday_ramp(holidays),
            strict=True,
        ),
        Quantity(
            "holiday: clicks on the day / the day before",
            "< 1 (drops on the day)",
            None,
            1.0,
            holiday_day(holidays),
            strict=True,
        ),
        Quantity(
            "pacing: late (18-24h) impression share, limited / unlimited days (min)",
            ">= 0.5 (throttled, not cut)",
            0.5,
            None,
            pacing_late_share_ratio,
        ),
        Quantity(
            "IS + lost IS (rank) + lost IS (budget) - 1 (max abs)",
            "0 (identity, up to rounding: <= 0.001)",
            0.0,
            0.001,
            is_identity_residual,
        ),
        Quantity(
            "campaign-day cost / daily budget (max, last 30 days)",
            "<= 2 (Google's daily overdelivery cap)",
            0.0,
            2.0,
            spend_over_budget,
        ),
        *PHYSICS_QUANTITIES,
    ]


# The physics rules of issue 39 (item 4), each measured from the agent-visible tables.
PHYSICS_QUANTITIES: tuple[Quantity, ...] = (
    Quantity(
        "edit timing: share of effectful edits whose slice's hours before the edit depart "
        "(|z| > 3), edit day minus the day before",
        "about 0 (effects start at the edit): <= 10 pp",
        None,
        0.10,
        edit_timing,
        "%",
    ),
    Quantity(
        "campaign-days with cost above 2x the daily budget in force (last 30 days)",
        "0 (a day at most 2x)",
        0.0,
        0.0,
        days_over_twice_budget,
        "n",
    ),
    Quantity(
        "campaign-months (the last 30 days) with cost above the budgets in force",
        "0 (a month at most 30.4 x the average budget)",
        0.0,
        0.0,
        months_over_budget,
        "n",
    ),
    Quantity(
        "budget-bound campaign-days (cost >= budget, or cut off in perf_hourly) with search "
        "lost IS (budget) > 0: share",
        "1 (a campaign held by its budget loses IS to budget)",
        1.0,
        1.0,
        lost_is_when_budget_binds,
    ),
    Quantity(
        "fatigue-like CTR falls (a creative on one placement, >= 30% week on week, significant, "
        "impressions steady) with frequency growth < 10%: share",
        "0 (fatigue builds with frequency)",
        0.0,
        0.0,
        fatigue_without_frequency,
    ),
    Quantity(
        "episodes whose alert numbers reproduce from perf_daily with the prompt's stated "
        "baseline (DuckDB): share",
        "1 (the prompt states its baseline)",
        1.0,
        1.0,
        alert_reproduces,
    ),
)


QUANTITIES: list[Quantity] = make_quantities()


def measure_all(
    episodes: Sequence[Tables], quantities: Sequence[Quantity] | None = None
) -> list[Row]:
    """Measure every quantity on the pooled episodes; a quantity whose tables are missing or
    malformed gets NaN and the error as its note (so one broken table does not hide the rest)."""
    p = pool(episodes)
    rows = []
    for quantity in QUANTITIES if quantities is None else quantities:
        try:
            result = quantity.measure(p)
        except Exception as exc:
            rows.append(Row(quantity, math.nan, f"error: {type(exc).__name__}: {exc}"))
            continue
        if isinstance(result, Measurement):
            rows.append(Row(quantity, float(result.value), result.note))
        else:
            rows.append(Row(quantity, float(result)))
    return rows


def to_markdown(rows: Sequence[Row]) -> str:
    """quantity | practitioner range | measured | in range, one line per row."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [
        "| quantity | practitioner range | measured | in range |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        measured = row.quantity.format(row.value)
        if row.note:
            measured += f" ({row.note})"
        lines.append(
            f"| {cell(row.quantity.name)} | {cell(row.quantity.expected)} | {cell(measured)} "
            f"| {row.status} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line


def prompt_table(prompt: str) -> pd.DataFrame:
    """An episode's prompt as the one-row table the alert quantity reads."""
    return pd.DataFrame({"text": [prompt]})


def dataset_episodes(
    root: str, n: int | None, cache_dir: str | None = None
) -> tuple[list[Tables], tuple[str, ...] | None]:
    """The tables of the first ``n`` episodes of a dataset directory (with the prompt as the
    table ``prompt``), and its holidays."""
    from causaltrace.datasets.storage import read_episode_tables
    from causaltrace.env import DatasetSource

    source = DatasetSource(root, cache_dir)
    ids = source.episode_ids if n is None else source.episode_ids[:n]
    episodes = []
    for i, episode in enumerate(ids):
        print(f"open {episode} ({i + 1}/{len(ids)})", file=sys.stderr)
        tables = read_episode_tables(source.visible_dir(episode))
        episodes.append({**tables, PROMPT: prompt_table(source.prompt(episode))})
    try:
        holidays = tuple(source.domain.settings.holidays)
    except Exception:
        holidays = None
    return episodes, holidays


def generated_episodes(
    n: int, seed: int, domain: Any = None
) -> tuple[list[Tables], tuple[str, ...] | None]:
    """``n`` fresh episodes of the ads domain (default preset), causes cycling over the
    domain's causes; only the agent-visible tables are built (the same bytes as
    ``build_episode(...).tables``), with the prompt as the table ``prompt``."""
    from causaltrace import load_domain
    from causaltrace.episodes.sampling import EpisodeSpec, build_visible, episode_id

    domain = load_domain("ads") if domain is None else domain
    causes = list(domain.scm.intervention_points)
    episodes = []
    for i in range(n):
        cause = causes[i % len(causes)]
        print(f"build episode {i + 1}/{n}: {cause}", file=sys.stderr)
        spec = EpisodeSpec(episode_id("realism", i), "realism", i, seed, cause, None)
        tables, prompt = build_visible(domain, spec)
        episodes.append({**tables, PROMPT: prompt_table(prompt)})
    return episodes, tuple(getattr(domain.settings, "holidays", ())) or None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m causaltrace_domains.ads.realism",
        description="Measure the ads domain's realism table on episodes' agent-visible tables.",
    )
    parser.add_argument("dataset", nargs="?", help="a generated dataset directory")
    parser.add_argument("--episodes", type=int, default=None, help="the first N episodes only")
    parser.add_argument("--cache-dir", default=None, help="where lazy episodes are rebuilt")
    parser.add_argument(
        "--generate", type=int, default=None, metavar="N", help="build N episodes in memory"
    )
    parser.add_argument("--seed", type=int, default=0, help="dataset seed with --generate")
    args = parser.parse_args(argv)
    if args.generate is not None:
        if args.dataset is not None:
            parser.error("give a dataset directory or --generate, not both")
        episodes, holidays = generated_episodes(args.generate, args.seed)
        source = f"{args.generate} generated episodes of the default ads preset, seed {args.seed}"
    elif args.dataset is not None:
        episodes, holidays = dataset_episodes(args.dataset, args.episodes, args.cache_dir)
        source = f"{len(episodes)} episodes of {args.dataset}"
    else:
        parser.error("give a dataset directory or --generate N")
    if not episodes:
        parser.error("no episodes")
    rows = measure_all(episodes, make_quantities(holidays))
    print(f"Realism of the ads domain: {source}\n")
    print(to_markdown(rows))
    n_in = sum(row.in_range for row in rows)
    print(f"\n{n_in}/{len(rows)} quantities in range")
    return 0


if __name__ == "__main__":
    sys.exit(main())
