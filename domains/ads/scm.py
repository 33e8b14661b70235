"""The ad-delivery SCM: the funnel from auction opportunities to conversion value.

demand_index -> market_demand, volume_trait, targeting_eligibility, placement_weight ->
placement_share, creative_approval, rotation_weight -> serving_share  ==> opportunity_rate ->
auctions
bid_modifier -> bid, quality, competition_index, rival_sensitivity -> competitor_pressure ->
rank_win_rate, expected_cpc
auctions, rank_win_rate -> won_auctions -> ctr (wear with frequency)
won_auctions, ctr, expected_cpc, budget_headroom, budget_change -> daily_budget (set from typical
spend) -> budget_cutoff_hour -> pacing
won_auctions, pacing -> impressions -> human_clicks, bot_clicks -> invalid_clicks, clicks
clicks, cpc -> cost;  human_clicks, cvr -> real_conversions (backend orders)
real_conversions, tag_fire_rate -> tracked_conversions -> conversions (lagged)
conversions, order_value -> conversion_value;  real_conversions -> backend_revenue
"""

from __future__ import annotations

import numpy as np

from causaltrace import SCM, Constant, Node, Uniform
from causaltrace_domains.ads import mechanisms as m
from causaltrace_domains.ads import segments as seg
from causaltrace_domains.ads.config import AdsConfig
from causaltrace_domains.ads.panel import build_panel

INT = "int64"


def build_nodes(config: AdsConfig, panel) -> list[Node]:
    """The nodes of the ads SCM for ``config`` on ``panel``."""
    specs = {c.name: c for c in config.campaigns}
    n_placements = seg.count_within(panel, (*m.CAMPAIGN_SEGMENT, "creative"), "placement")
    n_creatives = seg.count_within(panel, m.AD_GROUP, "creative")
    volume = (
        config.daily_auctions_per_cell
        * seg.multiplier(panel, seg.VOLUME)
        * seg.by_campaign(panel, {c: s.volume for c, s in specs.items()})
    )
    elasticity = seg.by_campaign(
        panel, {c: seg.DEMAND_ELASTICITY[s.kind] for c, s in specs.items()}
    )
    # Rivals bid on category terms most, on the brand's own name least (brand terms are won
    # almost always: a high rank offset), on display placements in between.
    theme = seg.by_campaign(
        panel,
        {
            c: seg.RIVAL_SENSITIVITY["brand" if s.rank_offset > 1.0 else s.kind]
            for c, s in specs.items()
        },
    )
    applies_modifier = seg.by_campaign(
        panel, {c: float(s.applies_bid_adjustments) for c, s in specs.items()}
    ).astype(bool)
    placement_weight = seg.multiplier(panel, {"placement": seg.PLACEMENT_WEIGHT})
    # The opportunity base is per campaign segment; the placement and creative shares split it.
    base_volume = volume * n_placements * n_creatives
    eligibility = seg.multiplier(panel, seg.ELIGIBILITY)
    reference_cpc = seg.by_campaign(
        panel, {c.name: c.target_cpc for c in config.campaigns}
    ) * seg.multiplier(panel, seg.CPC)
    bid = 1.15 * reference_cpc
    ctr_base = seg.by_campaign_placement(
        panel, {c.name: dict(c.ctr) for c in config.campaigns}
    ) * seg.multiplier(panel, seg.CTR)
    cvr_base = seg.by_campaign_placement(
        panel, {c.name: dict(c.cvr) for c in config.campaigns}
    ) * seg.multiplier(panel, seg.CVR)
    rank_offset = seg.by_campaign(panel, {c.name: c.rank_offset for c in config.campaigns})
    consent = np.broadcast_to(seg.by_level(panel, "geo", config.consent_rate), panel.shape)
    cross_device = seg.by_level(panel, "placement", config.modelled_rate, default=0.0)
    pool = 12.0 * volume * eligibility * 0.75  # reachable users: ~12 days of wins per leaf
    aov = config.average_order_value * seg.multiplier(panel, seg.ORDER_VALUE)
    is_safari = np.isin(panel.labels("browser_os"), seg.SAFARI)[:, None]
    tag_rate = np.where(is_safari, config.safari_tag_fire_rate, config.base_tag_fire_rate)
    bot_rate = config.bot_click_rate * seg.multiplier(panel, seg.BOT_RATE)
    days = panel.time.values.astype("datetime64[D]")
    weekday_shape = _weekly_shape(panel, config.weekly_amplitude)
    holiday_demand, holiday_cvr = holiday_season(days, config)
    weekday = (days.astype(np.int64) + 3) % 7  # Monday = 0
    cvr_by_day = np.asarray(config.weekday_cvr, dtype=np.float64)[weekday] * holiday_cvr
    age = (panel.n_time - 1 - np.arange(panel.n_time))[None, :]
    reported_fraction = reported_share(age, config)
    healthy_ctr = m.ClickThroughRate(ctr_base, pool)
    profiles = m.hour_profiles(np.asarray(panel.dimension("device").levels))
    # The platform's budget rules (off: the fixed overdelivery pacing of the committed splits);
    # with them pacing also counts the bot clicks it bills.
    rules = m.BudgetRules.from_config(config)
    billing = ("bot_rate", "invalid_filter_rate") if rules is not None else ()

    def node(
        name, mechanism, parents=(), *, noise=True, observed=False, dtype="float64", description=""
    ):
        return Node(
            name,
            mechanism,
            tuple(parents),
            noise=Uniform() if noise else _no_noise(),
            observed=observed,
            dtype=dtype,
            description=description,
        )

    return [
        node(
            "demand_index",
            Constant(1.0),
            noise=False,
            description="the market's demand level (1 normally)",
        ),
        node(
            "market_demand",
            m.MarketDemand(weekday_shape, config.trend_per_week / 7, holiday_demand, elasticity),
            ["demand_index"],
            description="search interest: seasonality, trend, holidays, shocks",
        ),
        node("volume_trait", m.SegmentTrait(0.35), description="segment size (per episode)"),
        node(
            "targeting_eligibility",
            Constant(np.broadcast_to(eligibility, panel.shape)),
            noise=False,
            description="share of the segment the targeting reaches",
        ),
        node(
            "placement_weight",
            m.PlacementWeight(placement_weight),
            description="automatic placement preference",
        ),
        node("placement_share", m.PlacementShare(), ["placement_weight"]),
        node(
            "creative_approval",
            Constant(1.0),
            noise=False,
            description="1 while the creative is approved to serve",
        ),
        node(
            "rotation_weight",
            Constant(1.0),
            noise=False,
            description="the creative's weight in its ad group's rotation (set per account)",
        ),
        node("serving_share", m.ServingShare(), ["creative_approval", "rotation_weight"]),
        node(
            "ad_strength",
            m.AdStrength(),
            ["creative_approval", "rotation_weight"],
            noise=False,
            description="the ad group's ad strength relative to full (fewer approved ads: less)",
        ),
        node(
            "campaign_enabled",
            Constant(1.0),
            noise=False,
            description="1 while the campaign is enabled, 0 while it is paused",
        ),
        node(
            "opportunity_rate",
            m.OpportunityRate(base_volume),
            [
                "volume_trait",
                "market_demand",
                "targeting_eligibility",
                "placement_share",
                "serving_share",
                "campaign_enabled",
            ],
            noise=False,
        ),
        node(
            "auctions",
            m.Auctions(config.auction_dispersion),
            ["opportunity_rate"],
            dtype=INT,
            description="eligible auction opportunities",
        ),
        node(
            "competition_index",
            Constant(1.0),
            noise=False,
            description="the market's competition level (1 normally)",
        ),
        node(
            "rival_sensitivity",
            m.GroupTrait(("campaign", "geo"), 0.3, theme),
            description="how strongly rivals respond in each campaign's market and geo",
        ),
        node(
            "competitor_pressure",
            m.CompetitorPressure(config.auction_volatility),
            ["competition_index", "rival_sensitivity"],
            description="competitors' bid level (index around 1)",
        ),
        node(
            "bid_modifier",
            Constant(1.0),
            noise=False,
            description="the segment's bid adjustment (1: none)",
        ),
        node(
            "bid",
            m.Bid(bid, applies_modifier),
            ["bid_modifier"],
            noise=False,
            description="max CPC with bid modifiers (manual CPC campaigns)",
        ),
        node("quality", m.SegmentTrait(0.15), description="ad quality (per episode)"),
        node(
            "rank_win_rate",
            m.RankWinRate(reference_cpc, rank_offset),
            ["bid", "quality", "competitor_pressure", "ad_strength"],
            noise=False,
        ),
        node(
            "expected_cpc", m.ExpectedCpc(reference_cpc), ["bid", "quality", "competitor_pressure"]
        ),
        node(
            "won_auctions",
            m.BinomialCount("auctions", "rank_win_rate"),
            ["auctions", "rank_win_rate"],
            dtype=INT,
            description="auctions won on ad rank (before the budget)",
        ),
        node("ctr_trait", m.SegmentTrait(0.2)),
        # fatigue="frequency" only (the committed splits' SCM has no such node).
        *_audience_nodes(config),
        node(
            "ctr",
            healthy_ctr,
            ["won_auctions", "ctr_trait"],
            description="click-through rate of a human user",
        ),
        node(
            "budget_headroom",
            Constant(np.broadcast_to(nominal_headroom(config, panel), panel.shape)),
            noise=False,
            description="the budget as a multiple of typical spend (set per account)",
        ),
        node(
            "budget_change",
            Constant(1.0),
            noise=False,
            description="the advertiser's budget edits, as a multiple of the initial budget",
        ),
        node(
            "daily_budget",
            m.DailyBudget(reference_days=28),
            ["won_auctions", "ctr", "expected_cpc", "budget_headroom", "budget_change"],
            noise=False,
            observed=True,
            description="campaign daily budget",
        ),
        node(
            "budget_cutoff_hour",
            m.BudgetCutoff(config.overdelivery, profiles, rules=rules),
            ["won_auctions", "ctr", "expected_cpc", "daily_budget", *billing],
            description="hour a budget-limited campaign stops serving (24: not limited)",
        ),
        node(
            "pacing",
            m.Pacing(config.overdelivery, profiles, rules=rules),
            [
                "won_auctions",
                "ctr",
                "expected_cpc",
                "daily_budget",
                "budget_cutoff_hour",
                *billing,
            ],
            noise=False,
            description="share of won auctions served before the budget ran out",
        ),
        node(
            "impressions",
            m.BinomialCount("won_auctions", "pacing"),
            ["won_auctions", "pacing"],
            dtype=INT,
            observed=True,
        ),
        node(
            "human_clicks", m.BinomialCount("impressions", "ctr"), ["impressions", "ctr"], dtype=INT
        ),
        node(
            "bot_rate",
            Constant(np.broadcast_to(bot_rate, panel.shape)),
            noise=False,
            description="bot clicks per impression",
        ),
        node("bot_clicks", m.BotClicks(), ["impressions", "human_clicks", "bot_rate"], dtype=INT),
        node("invalid_filter_rate", Constant(config.invalid_filter_rate), noise=False),
        node(
            "invalid_clicks",
            m.BinomialCount("bot_clicks", "invalid_filter_rate"),
            ["bot_clicks", "invalid_filter_rate"],
            dtype=INT,
            observed=True,
            description="clicks filtered as invalid (not billed)",
        ),
        node(
            "clicks",
            m.ReportedClicks(),
            ["human_clicks", "bot_clicks", "invalid_clicks"],
            noise=False,
            dtype=INT,
            observed=True,
            description="billed clicks",
        ),
        node("cpc", m.ActualCpc(), ["expected_cpc"]),
        node(
            "cost",
            m.Cost(),
            ["clicks", "cpc"],
            noise=False,
            observed=True,
        ),
        node("cvr_trait", m.SegmentTrait(0.25)),
        node(
            "intent_drift",
            m.GroupWalk(("campaign",), 0.006),
            description="slow drift of each campaign's conversion rate",
        ),
        node(
            "cvr",
            m.ConversionRate(cvr_base, eligibility, cvr_by_day),
            ["targeting_eligibility", "cvr_trait", "intent_drift"],
            description="real conversion rate of a human click",
        ),
        node(
            "real_conversions",
            m.BinomialCount("human_clicks", "cvr"),
            ["human_clicks", "cvr"],
            dtype=INT,
            observed=True,
            description="backend orders (first-party truth)",
        ),
        node("tag_fire_rate", Constant(np.broadcast_to(tag_rate, panel.shape)), noise=False),
        node(
            "consent_rate",
            Constant(consent),
            noise=False,
            description="share of users who consent to measurement (EU/UK banners)",
        ),
        node(
            "tracked_conversions",
            m.TrackedConversions(),
            ["real_conversions", "tag_fire_rate", "consent_rate"],
            dtype=INT,
            description="conversions the tag recorded, eventually",
        ),
        node(
            "modelled_conversions",
            m.ModelledConversions(cross_device, config.consent_modelled_share),
            ["real_conversions", "consent_rate"],
            dtype=INT,
            description="consent-modelled, cross-device and view-through conversions",
        ),
        node(
            "conversions",
            m.LaggedConversions(reported_fraction),
            ["tracked_conversions", "modelled_conversions"],
            dtype=INT,
            observed=True,
            description="conversions reported so far (click date)",
        ),
        node("order_value", m.OrderValue(aov)),
        node(
            "conversion_value",
            m.Value("conversions"),
            ["conversions", "order_value"],
            noise=False,
            observed=True,
        ),
        node(
            "backend_revenue",
            m.Value("real_conversions"),
            ["real_conversions", "order_value"],
            noise=False,
            observed=True,
        ),
        node(
            "landing_drift",
            m.GroupWalk(("campaign", "device"), 0.006),
            description="slow drift of the share of landings analytics captures",
        ),
        node(
            "sessions",
            m.Sessions(config.sessions_per_click),
            ["human_clicks", "bot_clicks", "invalid_clicks", "consent_rate", "landing_drift"],
            dtype=INT,
            observed=True,
            description="site sessions from ad clicks",
        ),
    ]


def _audience_nodes(config: AdsConfig) -> list[Node]:
    """The creatives' fresh audience (1: it renews as usual), which CREATIVE_FATIGUE shrinks
    under ``fatigue="frequency"`` (:class:`~causaltrace_domains.ads.mechanisms.FrequencyFatiguedCtr`);
    no node otherwise."""
    if config.fatigue != "frequency":
        return []
    return [
        Node(
            "audience_size",
            Constant(1.0),
            (),
            noise=_no_noise(),
            observed=False,
            description="the creative's fresh audience relative to usual (1: it renews)",
        )
    ]


def nominal_headroom(config: AdsConfig, panel) -> np.ndarray:
    """Each cell's campaign's typical budget headroom, (n_cells, 1): the geometric middle of the
    campaign's range (an account draws its own value, ``account_state``)."""
    return seg.by_campaign(
        panel, {c.name: float(np.sqrt(np.prod(c.budget_headroom))) for c in config.campaigns}
    )


def reported_share(age: np.ndarray, config: AdsConfig) -> np.ndarray:
    """Expected share of a day's eventual conversions reported by ``age`` days after it: about
    half on the day, a tail of 2-4 weeks (two exponential components)."""
    fast = config.lag_fast_share * np.exp(-(age + 1.0) / config.lag_fast_days)
    slow = (1.0 - config.lag_fast_share) * np.exp(-(age + 1.0) / config.lag_slow_days)
    return 1.0 - fast - slow


def holiday_season(days: np.ndarray, config: AdsConfig) -> tuple[np.ndarray, np.ndarray]:
    """Demand and CVR multipliers per day around gift holidays: demand ramps up linearly over
    ``holiday_ramp_days`` before the holiday to ``1 + holiday_lift`` the day before, drops on the
    day itself (gifts are bought by then) and returns to normal after; buyers in the ramp are
    more decided (CVR up by a third of the demand lift)."""
    demand = np.ones(days.size)
    ramp = max(int(config.holiday_ramp_days), 1)
    for holiday in np.array(config.holidays, dtype="datetime64[D]"):
        before = (holiday - days).astype(np.int64)  # days until the holiday
        in_ramp = (before >= 1) & (before <= ramp)
        demand[in_ramp] *= 1.0 + config.holiday_lift * (ramp + 1 - before[in_ramp]) / ramp
        demand[before == 0] *= 1.0 - config.holiday_lift / 2
    cvr = 1.0 + (demand - 1.0).clip(min=0.0) / 3.0
    return demand, cvr


def _weekly_shape(panel, amplitude: float) -> np.ndarray:
    """Weekday multipliers per cell: desktop peaks mid-week, mobile at the weekend."""
    weekday = np.arange(7)
    midweek = 1 + amplitude * np.cos(2 * np.pi * (weekday - 2) / 7)
    weekend = 1 + amplitude * np.cos(2 * np.pi * (weekday - 5.5) / 7)
    is_desktop = (panel.labels("device") == "desktop")[:, None]
    return np.where(is_desktop, midweek[None, :], weekend[None, :])


def _no_noise():
    from causaltrace import NoNoise

    return NoNoise()


def build_scm(config: AdsConfig, intervention_points=()) -> SCM:
    panel = build_panel(config)
    return SCM(build_nodes(config, panel), panel, intervention_points, name="ads")
