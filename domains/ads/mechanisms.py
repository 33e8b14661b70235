"""Mechanisms of the ad-delivery funnel: pure, vectorized functions over the whole panel.

Each mechanism is a frozen dataclass holding its per-cell constants (computed once from the
config and the panel) and mapping parent arrays and its own noise to a ``(n_cells, n_days)``
array. Counts come from count distributions driven by uniform noise (inverse CDF), so that the
factual and counterfactual worlds differ only where the cause moved a count's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.signal import lfilter

from causaltrace import Panel
from causaltrace.errors import CausalTraceError
from causaltrace.model.distributions import binomial_icdf, negbinom_icdf, normal_icdf

if TYPE_CHECKING:
    from causaltrace_domains.ads.config import AdsConfig

# Grouping keys used across mechanisms.
AD_GROUP = ("campaign", "placement", "device", "browser_os", "geo", "audience")  # all but creative
CAMPAIGN_SEGMENT = (
    "campaign",
    "device",
    "browser_os",
    "geo",
    "audience",
)  # all but creative, placement


def _per_cell_constant(noise: np.ndarray, sd: float) -> np.ndarray:
    """A time-constant log-normal trait per cell from the first column of uniform noise."""
    return np.exp(sd * normal_icdf(noise[:, :1]) - 0.5 * sd * sd)


@dataclass(frozen=True, eq=False)
class SegmentTrait:
    """A per-cell multiplicative trait, constant over time (the account's own structure drawn
    anew per episode, so that agents cannot memorise segment baselines)."""

    sd: float

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return np.broadcast_to(_per_cell_constant(noise, self.sd), panel.shape).copy()


@dataclass(frozen=True, eq=False)
class MarketDemand:
    """Search interest: weekly cycle x trend x holiday season x a common AR(1) daily shock x a
    small per-cell shock x the market's demand level (parent ``demand_index``, 1 normally)
    raised to the segment's ``elasticity``.

    A shift in demand does not reach every campaign alike: people searching the category move
    with it fully, Performance Max's mix of search and feed traffic less, and remarketing
    banners, shown to past visitors wherever they browse, hardly at all.
    """

    weekly: np.ndarray  # (n_cells, 7) multiplier by weekday, device-specific
    trend_per_day: float
    holiday: np.ndarray  # (n_days,) multiplier: gift demand ramps up before, drops on the day
    elasticity: np.ndarray | float = 1.0  # (n_cells, 1): response to the demand level
    common_sd: float = 0.05
    cell_sd: float = 0.04

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        days = panel.time.values.astype("datetime64[D]").astype(np.int64)
        weekday = (days + 3) % 7  # 1970-01-01 was a Thursday: Monday = 0
        t = np.arange(panel.n_time, dtype=np.float64)
        z = normal_icdf(noise)
        # A common AR(1) shock (coefficient 0.6) over days, from the first cell's noise.
        common = lfilter([1.0], [1.0, -0.6], self.common_sd * z[0])
        seasonal = self.weekly[:, weekday] * ((1 + self.trend_per_day * t) * self.holiday)[None, :]
        level = np.power(parents["demand_index"], self.elasticity)
        return seasonal * np.exp(common[None, :] + self.cell_sd * z) * level


@dataclass(frozen=True, eq=False)
class GroupTrait:
    """A time-constant log-normal trait per group of cells on ``dims`` (e.g. how hard rivals
    compete in each campaign's market of each geo), from the noise of the group's first cell,
    times a per-cell ``scale``."""

    dims: tuple[str, ...]
    sd: float
    scale: np.ndarray | float = 1.0

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        idx, n_groups = panel.group_index(self.dims)
        first = np.zeros(n_groups, dtype=np.int64)
        first[idx[::-1]] = np.arange(panel.n_cells)[::-1]
        trait = np.exp(self.sd * normal_icdf(noise[first, 0]) - 0.5 * self.sd * self.sd)
        return np.broadcast_to(self.scale * trait[idx][:, None], panel.shape).copy()


@dataclass(frozen=True, eq=False)
class GroupWalk:
    """A slow multiplicative random walk per group of cells on ``dims`` (rates that drift over
    weeks: the site's session capture, shoppers' intent), 1 on the first day."""

    dims: tuple[str, ...]
    sd_per_day: float

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        z = normal_icdf(noise)
        idx, n_groups = panel.group_index(self.dims)
        size = np.bincount(idx, minlength=n_groups).astype(np.float64)
        # The group mean of n unit normals has sd 1/sqrt(n): rescaled to a unit step.
        step = panel.group_mean(z, self.dims) * np.sqrt(size)[:, None]
        step[:, 0] = 0.0
        walk = np.cumsum(self.sd_per_day * step, axis=1)
        return np.exp(panel.group_broadcast(walk, self.dims))


@dataclass(frozen=True, eq=False)
class PlacementWeight:
    """Automatic placement's preference for each placement of a campaign.

    The weights drift slowly (a random walk per campaign and placement: the breakdown effect of
    automatic allocation); PLACEMENT_SHIFT scales one placement's weight up.
    """

    base_weight: np.ndarray  # (n_cells, 1)
    drift_sd: float = 0.03

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        walk = np.cumsum(self.drift_sd * normal_icdf(noise), axis=1)
        group_walk = panel.group_mean(walk, ("campaign", "placement"))
        return self.base_weight * np.exp(
            panel.group_broadcast(group_walk, ("campaign", "placement"))
        )


@dataclass(frozen=True, eq=False)
class PlacementShare:
    """Share of a campaign segment's opportunities served on each placement: the weights
    renormalised within the segment, so raising one placement moves volume from the others."""

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return panel.group_share(parents["placement_weight"], (*CAMPAIGN_SEGMENT, "creative"))


@dataclass(frozen=True, eq=False)
class ServingShare:
    """Creative rotation: approved creatives split an ad group's eligible auctions by rotation
    weight (parent ``rotation_weight``: each account's rotation favours some ads).

    A disapproved creative (approval 0) drops out and its siblings take its auctions; the ad
    group stays eligible while one of its ads is approved (what it loses is ad strength, which
    costs ad rank: :class:`AdStrength`)."""

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        weight = parents["rotation_weight"] * parents["creative_approval"]
        return panel.group_share(weight, AD_GROUP)


@dataclass(frozen=True, eq=False)
class AdStrength:
    """An ad group's ad strength relative to full, as a factor on its auctions won: with fewer
    approved ads it wins (approved rotation share) ** ``penalty`` of what it did (little lost
    when the disapproved ad carried little of the rotation)."""

    penalty: float = 0.6

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rotation = parents["rotation_weight"]
        approved = panel.group_sum(rotation * parents["creative_approval"], AD_GROUP)
        total = panel.group_sum(rotation, AD_GROUP)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(total > 0, approved / np.where(total > 0, total, 1.0), 0.0)
        return panel.group_broadcast(np.power(share, self.penalty), AD_GROUP)


@dataclass(frozen=True, eq=False)
class OpportunityRate:
    """Expected eligible auctions per cell-day: base volume x demand x targeting x placement
    share x creative serving share x campaign status (0 while paused)."""

    base: np.ndarray  # (n_cells, 1) auctions per campaign segment per day

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return (
            self.base
            * parents["volume_trait"]
            * parents["market_demand"]
            * parents["targeting_eligibility"]
            * parents["placement_share"]
            * parents["serving_share"]
            * parents["campaign_enabled"]
        )


@dataclass(frozen=True, eq=False)
class Auctions:
    """Eligible auction opportunities: negative binomial around the opportunity rate."""

    dispersion: float

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return negbinom_icdf(parents["opportunity_rate"], self.dispersion, noise)


@dataclass(frozen=True, eq=False)
class CompetitorPressure:
    """Competitors' bid level: a slow random walk around 1 per placement x geo, times day-to-day
    auction volatility per campaign x placement (competitors' budgets and bids change daily,
    so impression share moves a few points from day to day), times the market's competition
    level (parent ``competition_index``, 1 normally) raised to the segment's sensitivity
    (parent ``rival_sensitivity``): when rivals bid up, they do so where they compete, most on
    category terms, less on the brand's own name, unevenly across markets."""

    volatility: float = 0.1
    walk_sd: float = 0.015

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        z = normal_icdf(noise)
        walk = panel.group_mean(np.cumsum(self.walk_sd * z, axis=1), ("placement", "geo"))
        # The per-cell noise averaged within a campaign x placement has sd 1/sqrt(n): rescale it
        # to unit sd so that ``volatility`` is the daily sd of the group's log bid level.
        dims = ("campaign", "placement")
        idx, n_groups = panel.group_index(dims)
        size = np.bincount(idx, minlength=n_groups).astype(np.float64)
        daily = panel.group_mean(z, dims) * np.sqrt(size)[:, None]
        level = np.power(parents["competition_index"], parents["rival_sensitivity"])
        return level * np.exp(
            panel.group_broadcast(walk, ("placement", "geo"))
            + self.volatility * panel.group_broadcast(daily, dims)
        )


@dataclass(frozen=True, eq=False)
class Bid:
    """Max CPC: the campaign's target times the segment's bid adjustment (parent
    ``bid_modifier``, 1 without one) where the campaign applies adjustments (manual CPC);
    smart bidding sets its own bids and ignores them."""

    base: np.ndarray  # (n_cells, 1)
    applies_modifier: np.ndarray  # (n_cells, 1) bool: the cell's campaign bids manually

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        modifier = np.where(self.applies_modifier, parents["bid_modifier"], 1.0)
        return self.base * modifier


@dataclass(frozen=True, eq=False)
class RankWinRate:
    """Share of eligible auctions won on ad rank: logistic in log(bid x quality / pressure),
    times the ad group's ad strength (parent ``ad_strength``)."""

    reference_cpc: np.ndarray  # (n_cells, 1): the competitive price level of the segment
    offset: np.ndarray | float = 0.3  # (n_cells, 1): the campaign's rank logit (brand: high)
    slope: float = 2.2

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rank = np.log(
            parents["bid"]
            * parents["quality"]
            / (self.reference_cpc * parents["competitor_pressure"])
        )
        return parents["ad_strength"] / (1.0 + np.exp(-(self.slope * rank + self.offset)))


@dataclass(frozen=True, eq=False)
class ExpectedCpc:
    """Second-price CPC: what it takes to beat the competitor at this quality, capped by the bid."""

    reference_cpc: np.ndarray
    noise_sd: float = 0.05

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        needed = self.reference_cpc * parents["competitor_pressure"] / parents["quality"]
        price = np.minimum(parents["bid"], 0.6 * needed + 0.25 * parents["bid"])
        return price * np.exp(self.noise_sd * normal_icdf(noise))


@dataclass(frozen=True, eq=False)
class BinomialCount:
    """``trials`` parent thinned by probability parent ``rate`` (counts from counts)."""

    trials: str
    rate: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return binomial_icdf(parents[self.trials], parents[self.rate], noise)


@dataclass(frozen=True, eq=False)
class DailyBudget:
    """The campaign's daily budget: the account's headroom (parent ``budget_headroom``, drawn
    per account) x its typical unconstrained spend over the first ``reference_days`` days x the
    advertiser's later budget edits (parent ``budget_change``, 1 before any), rounded to 10 as
    people set budgets."""

    reference_days: int

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        demand = parents["won_auctions"] * parents["ctr"] * parents["expected_cpc"]
        per_campaign = panel.group_sum(demand, ("campaign",))
        typical = np.median(per_campaign[:, : self.reference_days], axis=1)
        idx, _ = panel.group_index(("campaign",))
        setting = parents["budget_headroom"] * parents["budget_change"] * typical[idx][:, None]
        return np.maximum(np.round(setting / 10.0) * 10.0, 10.0)


@dataclass(frozen=True)
class BudgetRules:
    """The platform's rules against the daily budget (``AdsConfig.budget_rules``).

    Per campaign and day, from the day's expected spend if nothing were throttled (``demand``)
    and its budget: the day is *bound* once demand reaches ``pacing_onset`` x the budget (or
    what the day and month caps leave); a bound day serves at most ``1 - min_throttle`` of its
    demand (so a campaign held by its budget always loses impression share to it) and spends
    the budget times the day's demand over the week's (busy days more, quiet days less; at
    least ``pacing_onset`` x the budget), never above ``day_cap`` x the budget nor above what
    keeps every window of ``month_days`` days (and every run from the first day) within its
    budgets. The pacing aims ``margin`` under the month's limit and four times that under the
    day's, because billed clicks scatter around the expected spend (a campaign-day by about
    3%, a month by well under 1%); unthrottled days spend their demand.
    """

    pacing_onset: float = 0.9
    min_throttle: float = 0.05
    day_cap: float = 2.0
    month_days: tuple[int, int] = (28, 31)
    margin: float = 0.03
    week_days: int = 7

    def __post_init__(self) -> None:
        lo, hi = (int(d) for d in self.month_days)
        problems = {
            "budget_pacing_onset": (self.pacing_onset, 0.0 < self.pacing_onset <= 1.0, "(0, 1]"),
            "budget_min_throttle": (self.min_throttle, 0.0 < self.min_throttle < 1.0, "(0, 1)"),
            "budget_day_cap": (self.day_cap, self.day_cap >= 1.0, ">= 1"),
            "budget_month_days": (
                self.month_days,
                1 <= lo <= hi,
                "[low, high] with 1 <= low <= high",
            ),
            "budget_margin": (self.margin, 0.0 <= self.margin < 0.25, "[0, 0.25)"),
        }
        bad = {k: (v, want) for k, (v, ok, want) in problems.items() if not ok}
        if bad:
            detail = "; ".join(f"{k} = {v!r} (must be {want})" for k, (v, want) in bad.items())
            raise CausalTraceError(f"ads domain config: {detail}")

    @classmethod
    def from_config(cls, config: AdsConfig) -> BudgetRules | None:
        """The rules an ``AdsConfig`` switches on (None: ``budget_rules`` off)."""
        if not config.budget_rules:
            return None
        return cls(
            float(config.budget_pacing_onset),
            float(config.budget_min_throttle),
            float(config.budget_day_cap),
            tuple(int(d) for d in config.budget_month_days),
            float(config.budget_margin),
        )

    def allowance(self, demand: np.ndarray, budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The expected spend each campaign-day is allowed and whether its budget binds, from
        ``demand`` and ``budget`` (both (n_campaigns, n_days)). Vectorized over campaigns;
        the month's room depends on the days before, so days run in order."""
        n, n_days = demand.shape
        day = np.arange(n_days)
        first = np.maximum(day - self.week_days + 1, 0)
        total = np.concatenate([np.zeros((n, 1)), np.cumsum(demand, axis=1)], axis=1)
        week = (total[:, day + 1] - total[:, first]) / (day - first + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            busy = np.where(week > 0, demand / np.where(week > 0, week, 1.0), 1.0)
        target = budget * np.maximum(busy, self.pacing_onset)
        day_ceiling = self.day_cap * (1.0 - 4.0 * self.margin) * budget
        month = np.concatenate(
            [np.zeros((n, 1)), np.cumsum((1.0 - self.margin) * budget, axis=1)], axis=1
        )
        spent = np.zeros((n, n_days + 1))
        lengths = np.arange(self.month_days[0], self.month_days[1] + 1)
        allowed = np.zeros_like(demand)
        binds = np.zeros(demand.shape, dtype=bool)
        for t in range(n_days):
            start = np.maximum(t + 1 - lengths, 0)  # windows [start, t]; at first, from day 0
            room = (month[:, t + 1, None] - month[:, start]) - (spent[:, t, None] - spent[:, start])
            ceiling = np.minimum(day_ceiling[:, t], np.maximum(room.min(axis=1), 0.0))
            bound = demand[:, t] > np.minimum(self.pacing_onset * budget[:, t], ceiling)
            capped = np.minimum(
                np.minimum(target[:, t], (1.0 - self.min_throttle) * demand[:, t]), ceiling
            )
            allowed[:, t] = np.where(bound, capped, demand[:, t])
            binds[:, t] = bound
            spent[:, t + 1] = spent[:, t] + allowed[:, t]
        return allowed, binds


def _first_cells(panel: Panel, dims: tuple[str, ...]) -> np.ndarray:
    """A representative (the first) cell of each group of cells on ``dims``."""
    idx, n_groups = panel.group_index(dims)
    first = np.zeros(n_groups, dtype=np.int64)
    first[idx[::-1]] = np.arange(panel.n_cells)[::-1]
    return first


def _billed_demand(parents, rules: BudgetRules | None) -> np.ndarray:
    """Each cell's expected spend if nothing were throttled: its won auctions' clicks at the
    expected CPC; under the budget rules also the bot clicks the filter misses, which the
    platform bills and paces on like any click."""
    rate = parents["ctr"]
    if rules is not None:
        billed_bots = parents["bot_rate"] * (1.0 - parents["invalid_filter_rate"])
        rate = rate + (1.0 - parents["ctr"]) * billed_bots
    return parents["won_auctions"] * rate * parents["expected_cpc"]


def _rules_allowance(parents, panel: Panel, rules: BudgetRules, demand: np.ndarray):
    """The budget rules' (campaign, day) allowance and binding days for ``demand`` per cell,
    with the campaign-level demand they read (the same sums for the cutoff and the pacing)."""
    per_campaign = panel.group_sum(demand, ("campaign",))
    budget = parents["daily_budget"][_first_cells(panel, ("campaign",))]
    allowed, binds = rules.allowance(per_campaign, budget)
    return allowed, binds, per_campaign


def hour_profiles(devices: np.ndarray) -> np.ndarray:
    """Share of a day's auctions by hour for each device in ``devices``, (n, 24): desktop by
    day, mobile and tablet in the evening, connected TVs late."""
    hours = np.arange(24)
    desktop = np.exp(-0.5 * ((hours - 13.0) / 3.5) ** 2) + 0.05
    mobile = (
        np.exp(-0.5 * ((hours - 19.5) / 3.0) ** 2)
        + 0.5 * np.exp(-0.5 * ((hours - 12.5) / 2.5) ** 2)
        + 0.04
    )
    ctv = np.exp(-0.5 * ((hours - 21.0) / 2.0) ** 2) + 0.02
    table = {"desktop": desktop, "mobile": mobile, "tablet": mobile, "ctv": ctv}
    out = np.stack([table[d] for d in devices])
    return out / out.sum(axis=1, keepdims=True)


def cumulative_share(profiles: np.ndarray, hour: np.ndarray) -> np.ndarray:
    """Share of each profile's day served by (fractional) ``hour``: ``profiles`` (n, 24),
    ``hour`` broadcastable against (n, ...) and in [0, 24]; piecewise linear within an hour."""
    edges = np.concatenate([np.zeros((profiles.shape[0], 1)), np.cumsum(profiles, axis=1)], axis=1)
    edges[:, -1] = 1.0
    h = np.clip(hour, 0.0, 24.0)
    whole = np.minimum(np.floor(h).astype(np.int64), 23)
    rows = np.arange(profiles.shape[0]).reshape((-1,) + (1,) * (h.ndim - 1))
    rows = np.broadcast_to(rows, h.shape)
    lo = edges[rows, whole]
    return lo + (h - whole) * (edges[rows, whole + 1] - lo)


@dataclass(frozen=True, eq=False)
class BudgetCutoff:
    """The hour (0-24, fractional) at which a budget-limited campaign stops serving each day;
    24 on days its budget does not bind.

    Standard delivery throttles every hour by one factor so that the budget lasts the day, from
    a forecast of the day's demand that falls a little short (the budget runs out once a share
    ``U(*lasts)`` of the day's demand curve has passed, the share drawn per campaign-day from
    the node's noise). The demand curve is the campaign's devices' hourly profiles weighted by
    their spend, so where the budget runs out depends on the device mix: evening-heavy mobile
    traffic loses more than daytime desktop traffic.
    """

    overdelivery: float
    profiles: np.ndarray  # (n_devices, 24) hourly shares by device code
    lasts: tuple[float, float] = (0.9, 0.99)
    rules: BudgetRules | None = None

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        demand = _billed_demand(parents, self.rules)
        camp, n_camp = panel.group_index(("campaign",))
        device = panel.codes("device")
        n_dev = self.profiles.shape[0]
        by_cd = np.zeros((n_camp * n_dev, panel.n_time))
        np.add.at(by_cd, camp * n_dev + device, demand)
        by_cd = by_cd.reshape(n_camp, n_dev, panel.n_time)
        total = by_cd.sum(axis=1)
        first = _first_cells(panel, ("campaign",))
        allowed = self.overdelivery * parents["daily_budget"][first]
        lo_share, hi_share = self.lasts
        lasts = lo_share + (hi_share - lo_share) * noise[first]
        if self.rules is not None:
            # Bound days stop once the day's allowance is spent: at the share ``lasts`` of
            # the demand curve, or later when the allowance is a larger share of the demand
            # (serving unthrottled until it runs out).
            allowed, binds, total = _rules_allowance(parents, panel, self.rules, demand)
            with np.errstate(divide="ignore", invalid="ignore"):
                part = np.where(total > 0, allowed / np.where(total > 0, total, 1.0), 1.0)
            lasts = np.maximum(lasts, part)
        weight = by_cd / np.maximum(total, 1e-12)[:, None, :]  # (campaign, device, day)
        # Bisection for the hour where the spend-weighted demand curve reaches ``lasts``.
        lo, hi = np.zeros_like(total), np.full_like(total, 24.0)
        for _ in range(24):
            mid = 0.5 * (lo + hi)
            reached = (weight * _mixture_share(self.profiles, mid)).sum(axis=1)
            below = reached < lasts
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        bound = binds if self.rules is not None else total > allowed
        cutoff = np.where(bound, 0.5 * (lo + hi), 24.0)
        return np.broadcast_to(cutoff[camp], panel.shape).copy()


def _mixture_share(profiles: np.ndarray, hour: np.ndarray) -> np.ndarray:
    """Each device's served share by ``hour`` (campaign, day): (campaign, device, day)."""
    n_dev = profiles.shape[0]
    h = np.broadcast_to(hour[:, None, :], (hour.shape[0], n_dev, hour.shape[1]))
    return cumulative_share(profiles, h.transpose(1, 0, 2)).transpose(1, 0, 2)


@dataclass(frozen=True, eq=False)
class Pacing:
    """Fraction of each cell's won auctions served (1 on days the budget does not bind).

    Up to the budget's cutoff hour every hour is throttled by one factor, chosen so that the
    campaign spends exactly its allowed ``overdelivery`` x budget; a cell keeps that factor
    times the share of its device's day that passes before the cutoff.
    """

    overdelivery: float
    profiles: np.ndarray  # (n_devices, 24)
    rules: BudgetRules | None = None

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        demand = _billed_demand(parents, self.rules)
        cutoff = parents["budget_cutoff_hour"]
        device = panel.codes("device")
        served = cumulative_share(self.profiles[device], cutoff)  # (cells, days)
        per_campaign = panel.group_sum(demand * served, ("campaign",))
        idx, _ = panel.group_index(("campaign",))
        if self.rules is None:
            allowed = self.overdelivery * parents["daily_budget"]
        else:
            allowed = _rules_allowance(parents, panel, self.rules, demand)[0][idx]
        reach = per_campaign[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            throttle = np.where(reach > 0, allowed / np.where(reach > 0, reach, 1.0), 1.0)
        return np.where(cutoff >= 24.0, 1.0, np.clip(throttle, 0.0, 1.0) * served)


@dataclass(frozen=True, eq=False)
class ClickThroughRate:
    """CTR: base by segment x creative trait x mild wear-out with cumulative frequency x noise."""

    base: np.ndarray  # (n_cells, 1)
    pool: np.ndarray  # (n_cells, 1) reachable users: frequency = impressions / pool
    wear: float = 0.002
    noise_sd: float = 0.06

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        cum_frequency = np.cumsum(parents["won_auctions"], axis=1) / self.pool
        wear = np.exp(-self.wear * cum_frequency)
        return np.clip(
            self.base * parents["ctr_trait"] * wear * np.exp(self.noise_sd * normal_icdf(noise)),
            0.0,
            0.9,
        )


@dataclass(frozen=True, eq=False)
class FatiguedCtr:
    """CTR of a fatiguing creative: decays with the cumulative frequency since ``onset``.

    Used by CREATIVE_FATIGUE through ``Replace``: the new mechanism wraps the healthy one.
    """

    healthy: ClickThroughRate
    onset: int
    decay: float

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        ctr = self.healthy(parents, noise, panel)
        served = np.array(parents["won_auctions"], dtype=np.float64)
        served[:, : self.onset] = 0.0
        frequency_since = np.cumsum(served, axis=1) / self.healthy.pool
        return ctr * np.exp(-self.decay * frequency_since)


def daily_frequency(load: np.ndarray) -> np.ndarray:
    """Impressions per reached user in a day when ``load`` = impressions / audience: reach in an
    audience of U is U (1 - exp(-I / U)) (each impression finds a user at random), so frequency
    is load / (1 - exp(-load)): 1 for a light load, the load itself for a heavy one. The
    formula of ``render.reach_frequency_daily``."""
    load = np.maximum(np.asarray(load, dtype=np.float64), 1e-9)
    return load / -np.expm1(-load)


@dataclass(frozen=True, eq=False)
class FrequencyFatiguedCtr:
    """CTR of a creative whose audience saturates (CREATIVE_FATIGUE with fatigue="frequency").

    Fatigue is a frequency effect: the same people see the same ad again and stop clicking it.
    The cause shrinks the creative's fresh audience (parent ``audience_size``, 1 normally; it
    falls over days on display and video inventory), so the same impressions reach fewer
    people and the frequency reach_frequency_daily reports rises; CTR falls by that rise,
    ``ctr = healthy x (f0 / f) ** elasticity``. With elasticity 1 the clicks per reached user
    stay what they were: showing the ad to the same users more often adds impressions, not
    clicks. Where the audience is whole (search traffic, other creatives) the ratio is 1 and
    CTR is the healthy one exactly, so CTR falls only where frequency rises.

    The load of a cell-day is its won auctions over its audience, the campaign's
    ``audience_universe`` times its first two weeks' daily won auctions (the table's audience,
    on the auctions the CTR node can read).
    """

    healthy: ClickThroughRate
    universe: np.ndarray  # (n_cells, 1) the campaign's audience_universe
    elasticity: float = 1.0
    reference_days: int = 14

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        ctr = self.healthy(parents, noise, panel)
        won = np.asarray(parents["won_auctions"], dtype=np.float64)
        audience = (
            self.universe * np.maximum(won[:, : self.reference_days].mean(axis=1), 1.0)[:, None]
        )
        load = won / audience
        size = np.clip(parents["audience_size"], 1e-6, None)
        rise = daily_frequency(load / size) / daily_frequency(load)
        return np.where(size < 1.0, ctr * rise ** (-self.elasticity), ctr)


@dataclass(frozen=True, eq=False)
class BotClicks:
    """Bot clicks on the impressions no human clicked (so clicks never exceed impressions)."""

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return binomial_icdf(
            parents["impressions"] - parents["human_clicks"], parents["bot_rate"], noise
        )


@dataclass(frozen=True, eq=False)
class ReportedClicks:
    """Billed clicks: human clicks plus the bot clicks the filter missed."""

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return parents["human_clicks"] + parents["bot_clicks"] - parents["invalid_clicks"]


@dataclass(frozen=True, eq=False)
class ActualCpc:
    """CPC paid per click around the expected price."""

    noise_sd: float = 0.04

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return parents["expected_cpc"] * np.exp(self.noise_sd * normal_icdf(noise))


@dataclass(frozen=True, eq=False)
class Cost:
    """Cost in account currency per cell-day, to the cent (rounded down): billed clicks x CPC.

    Pacing holds the expected spend within the day's overdelivery limit; realised clicks scatter
    around it, and unfiltered bot clicks are billed on top (platforms refund them later as
    invalid-activity credits on the invoice, not in the performance report). No cell's cost
    depends on another cell's clicks, so a cause that moves clicks in a slice moves cost there
    only.
    """

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return np.floor(parents["clicks"] * parents["cpc"] * 100.0) / 100.0


@dataclass(frozen=True, eq=False)
class ConversionRate:
    """Real (backend) conversion rate per human click: base x trait x intent x drift x noise.

    Intent falls when targeting widens: the marginal users a wider targeting adds are less
    likely to buy, so CVR scales with (baseline eligibility / eligibility) ** 0.7. Shoppers
    convert better early in the week and in the days before a gift holiday, and a campaign's
    conversion rate drifts slowly over weeks (parent ``intent_drift``: assortment, prices,
    competitors' offers).
    """

    base: np.ndarray
    base_eligibility: np.ndarray
    weekday: np.ndarray  # (n_days,) multiplier: the weekday's and the holiday season's CVR
    noise_sd: float = 0.08

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        intent = np.power(self.base_eligibility / parents["targeting_eligibility"], 0.7)
        rate = self.base * parents["cvr_trait"] * intent * self.weekday[None, :]
        rate = rate * parents["intent_drift"]
        return np.clip(rate * np.exp(self.noise_sd * normal_icdf(noise)), 0.0, 0.95)


@dataclass(frozen=True, eq=False)
class LaggedConversions:
    """Platform conversions reported so far (by click date): tagged plus modelled conversions,
    of which recent days have only part (conversion lag)."""

    reported_fraction: np.ndarray  # (1, n_days)

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        eventual = parents["tracked_conversions"] + parents["modelled_conversions"]
        return binomial_icdf(eventual, self.reported_fraction, noise)


@dataclass(frozen=True, eq=False)
class TrackedConversions:
    """Backend orders the tag records: the tag must fire and the user must have consented."""

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rate = parents["tag_fire_rate"] * parents["consent_rate"]
        return binomial_icdf(parents["real_conversions"], rate, noise)


@dataclass(frozen=True, eq=False)
class ModelledConversions:
    """Conversions the platform adds to the tagged ones: consent modelling (a share of what
    consent hides) and cross-device / view-through conversions that the shop's backend credits
    to another channel. Display and video campaigns therefore report more conversions than
    their click-attributed backend orders; Safari and EU traffic fewer."""

    cross_device: np.ndarray  # (n_cells, 1) by placement
    consent_share: float

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rate = self.consent_share * (1.0 - parents["consent_rate"]) + self.cross_device
        return binomial_icdf(parents["real_conversions"], np.minimum(rate, 1.0), noise)


@dataclass(frozen=True, eq=False)
class OrderValue:
    """Average order value per cell-day (log-normal around the segment's level)."""

    base: np.ndarray
    noise_sd: float = 0.12

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return self.base * np.exp(self.noise_sd * normal_icdf(noise))


@dataclass(frozen=True, eq=False)
class Value:
    """Count x average value, to the cent (conversion value, backend revenue)."""

    count: str

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return np.round(parents[self.count] * parents["order_value"], 2)


@dataclass(frozen=True, eq=False)
class Sessions:
    """Site sessions: clicks that land and are counted by analytics (humans mostly; filtered
    bots never reach the site). Consent banners hide part of the sessions in the EU and UK,
    and the share captured drifts slowly (parent ``landing_drift``: page speed, tag loading)."""

    landing_rate: float = 0.9

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        arrivals = parents["human_clicks"] + parents["bot_clicks"] - parents["invalid_clicks"]
        rate = self.landing_rate * (0.5 + 0.5 * parents["consent_rate"])
        rate = np.clip(rate * parents["landing_drift"], 0.0, 1.0)
        return binomial_icdf(arrivals, rate, noise)
