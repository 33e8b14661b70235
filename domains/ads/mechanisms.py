"""Mechanisms of the ad-delivery funnel: pure, vectorized functions over the whole panel.

Each mechanism is a frozen dataclass holding its per-cell constants (computed once from the
config and the panel) and mapping parent arrays and its own noise to a ``(n_cells, n_days)``
array. Counts come from count distributions driven by uniform noise (inverse CDF), so that the
factual and counterfactual worlds differ only where the cause moved a count's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from causaltrace import Panel
from causaltrace.model.distributions import binomial_icdf, negbinom_icdf, normal_icdf

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
    small per-cell shock."""

    weekly: np.ndarray  # (n_cells, 7) multiplier by weekday, device-specific
    trend_per_day: float
    holiday: np.ndarray  # (n_days,) multiplier: gift demand ramps up before, drops on the day
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
        return seasonal * np.exp(common[None, :] + self.cell_sd * z)


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
    """Creative rotation: approved creatives split an ad group's auctions by rotation weight.

    A disapproved creative (approval 0) drops out and its siblings absorb its traffic, but not
    all of it: an ad group with fewer eligible ads has lower ad strength and wins fewer
    auctions, so the group serves (approved weight share) ** ``strength_penalty`` of what it did.
    """

    rotation_weight: np.ndarray  # (n_cells, 1)
    strength_penalty: float = 0.6

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        weight = self.rotation_weight * parents["creative_approval"]
        approved = panel.group_sum(weight, AD_GROUP)
        total = panel.group_sum(np.broadcast_to(self.rotation_weight, weight.shape), AD_GROUP)
        idx, _ = panel.group_index(AD_GROUP)
        with np.errstate(divide="ignore", invalid="ignore"):
            eligible = np.where(total > 0, approved / np.where(total > 0, total, 1.0), 0.0)
        return panel.group_share(weight, AD_GROUP) * np.power(eligible, self.strength_penalty)[idx]


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
    so impression share moves a few points from day to day)."""

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
        return np.exp(
            panel.group_broadcast(walk, ("placement", "geo"))
            + self.volatility * panel.group_broadcast(daily, dims)
        )


@dataclass(frozen=True, eq=False)
class Bid:
    """Max CPC: the campaign's target times the account's bid modifiers for the segment."""

    base: np.ndarray  # (n_cells, 1)

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return np.broadcast_to(self.base, panel.shape).copy()


@dataclass(frozen=True, eq=False)
class RankWinRate:
    """Share of eligible auctions won on ad rank: logistic in log(bid x quality / pressure)."""

    reference_cpc: np.ndarray  # (n_cells, 1): the competitive price level of the segment
    offset: np.ndarray | float = 0.3  # (n_cells, 1): the campaign's rank logit (brand: high)
    slope: float = 2.2

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        rank = np.log(
            parents["bid"]
            * parents["quality"]
            / (self.reference_cpc * parents["competitor_pressure"])
        )
        return 1.0 / (1.0 + np.exp(-(self.slope * rank + self.offset)))


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
    """The campaign's daily budget, set by the advertiser at ``headroom`` x its typical
    unconstrained spend over the first ``reference_days`` days, rounded to 10."""

    headroom: np.ndarray  # (n_cells, 1) per campaign
    reference_days: int

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        demand = parents["won_auctions"] * parents["ctr"] * parents["expected_cpc"]
        per_campaign = panel.group_sum(demand, ("campaign",))
        typical = np.median(per_campaign[:, : self.reference_days], axis=1)
        idx, _ = panel.group_index(("campaign",))
        budget = np.round(self.headroom[:, 0] * typical[idx] / 10.0) * 10.0
        return np.broadcast_to(np.maximum(budget, 10.0)[:, None], panel.shape).copy()


@dataclass(frozen=True, eq=False)
class Pacing:
    """Fraction of the day's won auctions served before the budget runs out (campaign-day).

    Unconstrained spend is what the campaign would spend serving every auction it wins; the
    platform may overdeliver up to ``overdelivery`` x budget on a day. Serving stops at the hour
    the cumulative spend reaches it, so the served fraction is min(1, allowed / unconstrained).
    """

    overdelivery: float

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        demand = parents["won_auctions"] * parents["ctr"] * parents["expected_cpc"]
        per_campaign = panel.group_sum(demand, ("campaign",))
        idx, _ = panel.group_index(("campaign",))
        allowed = self.overdelivery * parents["daily_budget"]
        spend = per_campaign[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(spend > 0, allowed / np.where(spend > 0, spend, 1.0), 1.0)
        return np.clip(frac, 0.0, 1.0)


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
    """Real (backend) conversion rate per human click: base x trait x intent x noise.

    Intent falls when targeting widens: the marginal users a wider targeting adds are less
    likely to buy, so CVR scales with (baseline eligibility / eligibility) ** 0.7. Shoppers
    convert better early in the week and in the days before a gift holiday.
    """

    base: np.ndarray
    base_eligibility: np.ndarray
    weekday: np.ndarray  # (n_days,) multiplier: the weekday's and the holiday season's CVR
    noise_sd: float = 0.08

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        intent = np.power(self.base_eligibility / parents["targeting_eligibility"], 0.7)
        rate = self.base * parents["cvr_trait"] * intent * self.weekday[None, :]
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
    bots never reach the site). Consent banners hide part of the sessions in the EU and UK."""

    landing_rate: float = 0.9

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        arrivals = parents["human_clicks"] + parents["bot_clicks"] - parents["invalid_clicks"]
        rate = self.landing_rate * (0.5 + 0.5 * parents["consent_rate"])
        return binomial_icdf(arrivals, rate, noise)
