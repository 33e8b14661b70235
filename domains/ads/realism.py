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
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pandas as pd

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


def spend_over_budget(episodes: Sequence[Tables]) -> Measurement:
    """Largest campaign-day cost over the daily budget in effect (the change history's window)."""
    p = pool(episodes)
    perf = p.perf()
    best, where = math.nan, ""
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
        joined = joined[joined["budget"] > 0]
        if joined.empty:
            continue
        ratio = joined["cost"] / joined["budget"]
        i = int(ratio.to_numpy().argmax())
        if not ratio.iloc[i] <= best:
            best, where = float(ratio.iloc[i]), f"max at {joined['campaign'].iloc[i]}"
    if not math.isfinite(best):
        return Measurement(math.nan, "no campaigns table with budgets")
    return Measurement(best, where)


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
    ]


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


def dataset_episodes(
    root: str, n: int | None, cache_dir: str | None = None
) -> tuple[list[Tables], tuple[str, ...] | None]:
    """The tables of the first ``n`` episodes of a dataset directory, and its holidays."""
    from causaltrace.datasets.storage import read_episode_tables
    from causaltrace.env import DatasetSource

    source = DatasetSource(root, cache_dir)
    ids = source.episode_ids if n is None else source.episode_ids[:n]
    episodes = []
    for i, episode in enumerate(ids):
        print(f"open {episode} ({i + 1}/{len(ids)})", file=sys.stderr)
        episodes.append(read_episode_tables(source.visible_dir(episode)))
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
    ``build_episode(...).tables``)."""
    from causaltrace import load_domain
    from causaltrace.episodes.sampling import EpisodeSpec, build_visible, episode_id

    domain = load_domain("ads") if domain is None else domain
    causes = list(domain.scm.intervention_points)
    episodes = []
    for i in range(n):
        cause = causes[i % len(causes)]
        print(f"build episode {i + 1}/{n}: {cause}", file=sys.stderr)
        spec = EpisodeSpec(episode_id("realism", i), "realism", i, seed, cause, None)
        episodes.append(build_visible(domain, spec)[0])
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
