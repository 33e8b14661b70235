"""Configuration of the ads domain: account structure, horizon and noise levels.

Every number an analyst would recognise (budgets, CPCs, CTRs, conversion rates) lives here, so a
preset is a different account, not a different program. ``AdsConfig.from_mapping`` builds one
from a Hydra/OmegaConf mapping and names any unknown key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from causaltrace.core.config import typed_overrides
from causaltrace.errors import CausalTraceError

DEVICE_BROWSERS: dict[str, tuple[str, ...]] = {
    "mobile": ("ios_safari", "android_chrome"),
    "desktop": ("desktop_chrome", "mac_safari"),
    "tablet": ("ios_safari",),
    "ctv": ("other",),
}


BIDDING_STRATEGIES = (
    "manual_cpc",
    "maximize_conversions",
    "maximize_conversion_value",
    "target_cpa",
    "target_roas",
    "target_impression_share",
)
MANUAL_CPC = "manual_cpc"  # the one strategy that applies device, geo and audience bid adjustments
SMART_BIDDING = ("maximize_conversions", "maximize_conversion_value", "target_cpa", "target_roas")


@dataclass(frozen=True)
class CampaignSpec:
    """One campaign: its type, the creatives, placements, audiences and geos it serves.

    ``budget_headroom`` is the range of the daily budget as a multiple of the campaign's
    typical unconstrained spend; each episode's account draws its own value in it (log-uniform),
    so whether a campaign is budget-limited (headroom below about 1/``overdelivery``) or never
    spends near its budget (headroom 3 and more) is a fact of the account that only its spend
    against its budget shows. ``target_cpc`` is the campaign's average max CPC in account
    currency; ``volume`` scales its auction opportunities (brand terms are searched far less
    than the category: an e-commerce account spends most on non-brand). Placements, audiences
    and geos are the campaign's targeting: cells outside it do not exist in the panel.
    ``ctv`` devices exist only on the ``video`` placement.

    ``bidding`` is the campaign's bid strategy: device, geo and audience bid adjustments act
    on ``manual_cpc`` campaigns only; automated strategies (smart bidding's ``maximize_*`` and
    ``target_cpa``/``target_roas``, and ``target_impression_share``) set their own bids and
    ignore them (Google Ads keeps only a -100% device adjustment there), and Performance Max
    takes none at all.

    ``ctr`` and ``cvr`` are the campaign's baseline click-through and (backend) conversion
    rates per placement before the device, audience and geo shape: brand search converts an
    order of magnitude better than display. ``rank_offset`` is the campaign's ad-rank logit
    against its competitors (brand terms are won almost always, generic terms about half the
    time); ``competitors`` are the domains its auction insights show (none for display);
    ``audience_universe`` is the campaign's reachable audience in days of impressions, which
    sets daily frequency (search about 1.1, remarketing banners 2-5).
    """

    name: str
    kind: str
    creatives: tuple[str, ...]
    placements: tuple[str, ...]
    audiences: tuple[str, ...]
    geos: tuple[str, ...]
    budget_headroom: tuple[float, float]
    target_cpc: float
    ctr: Mapping[str, float] = field(default_factory=dict)
    cvr: Mapping[str, float] = field(default_factory=dict)
    rank_offset: float = 0.3
    competitors: tuple[str, ...] = ()
    audience_universe: float = 4.0
    volume: float = 1.0
    bidding: str = MANUAL_CPC

    def __post_init__(self) -> None:
        headroom = self.budget_headroom
        if isinstance(headroom, int | float):
            headroom = (float(headroom), float(headroom))
        headroom = tuple(float(h) for h in headroom)
        if len(headroom) != 2 or not 0 < headroom[0] <= headroom[1]:
            raise CausalTraceError(
                f"ads campaign {self.name!r}: budget_headroom must be a positive number or a "
                f"range [low, high], got {self.budget_headroom!r}"
            )
        object.__setattr__(self, "budget_headroom", headroom)
        if self.bidding not in BIDDING_STRATEGIES:
            raise CausalTraceError(
                f"ads campaign {self.name!r}: bidding {self.bidding!r} is not one of "
                f"{list(BIDDING_STRATEGIES)}"
            )
        if self.kind == "performance_max" and self.bidding == MANUAL_CPC:
            raise CausalTraceError(
                f"ads campaign {self.name!r}: Performance Max has no manual CPC bidding"
            )
        for name, rates in (("ctr", self.ctr), ("cvr", self.cvr)):
            missing = [p for p in self.placements if p not in rates]
            if missing:
                raise CausalTraceError(
                    f"ads campaign {self.name!r}: {name} has no rate for placement(s) {missing}"
                )
            bad = {p: r for p, r in rates.items() if not 0.0 <= float(r) < 1.0}
            if bad:
                raise CausalTraceError(
                    f"ads campaign {self.name!r}: {name} rates {bad} are not in [0, 1)"
                )

    @property
    def takes_bid_adjustments(self) -> bool:
        """Whether the platform lets the advertiser set device, geo and audience bid
        adjustments on this campaign (every type but Performance Max)."""
        return self.kind != "performance_max"

    @property
    def applies_bid_adjustments(self) -> bool:
        """Whether the adjustments change its bids (manual CPC only; smart bidding ignores)."""
        return self.takes_bid_adjustments and self.bidding == MANUAL_CPC

    @property
    def smart_bidding(self) -> bool:
        """Conversion-based smart bidding (it relearns after large edits and takes a target
        CPA or ROAS); target impression share is automated but bids for position."""
        return self.bidding in SMART_BIDDING


GEOS = ("us_west", "us_central", "us_east", "us_south", "canada", "uk", "germany", "france")
US = GEOS[:4]
EU_UK = ("uk", "germany", "france")  # consent banners: fewer tagged conversions and sessions
# Google Ads' audience types (similar/lookalike audiences were retired in 2023): remarketing
# lists, customer match, in-market, affinity and custom segments; ``broad`` is the traffic in
# no audience list (reached by observation mode, optimized targeting or expansion).
AUDIENCES = ("remarketing", "customer_match", "in_market", "affinity", "custom_segment", "broad")
PLACEMENTS = ("search", "search_partners", "display", "video")

BRAND = CampaignSpec(
    name="brand_search",
    kind="search",
    creatives=("brand_rsa_1", "brand_rsa_2"),
    placements=("search", "search_partners"),
    audiences=("remarketing", "in_market"),
    geos=GEOS,
    budget_headroom=(1.1, 4.5),
    target_cpc=0.9,
    ctr={"search": 0.15, "search_partners": 0.045},
    cvr={"search": 0.085, "search_partners": 0.055},
    rank_offset=2.2,
    competitors=("shopfast.example", "coupon-rocket.example"),
    audience_universe=4.0,
    volume=0.27,
    # Brand terms are bid to hold the top of the page: an automated strategy that sets its own
    # bids (bid adjustments do not apply).
    bidding="target_impression_share",
)
GENERIC = CampaignSpec(
    name="generic_search",
    kind="search",
    creatives=("generic_rsa_1", "generic_rsa_2"),
    placements=("search", "search_partners", "display"),  # search with display expansion
    audiences=("in_market", "affinity", "broad"),
    geos=US,
    budget_headroom=(0.6, 4.0),
    target_cpc=2.2,
    ctr={"search": 0.048, "search_partners": 0.016, "display": 0.0055},
    cvr={"search": 0.036, "search_partners": 0.024, "display": 0.008},
    rank_offset=0.0,
    competitors=(
        "shopfast.example",
        "megamart.example",
        "dealhub.example",
        "stylebox.example",
        "urbanwear.example",
    ),
    audience_universe=4.0,
    volume=1.4,
    bidding=MANUAL_CPC,
)
PMAX = CampaignSpec(
    name="pmax_prospecting",
    kind="performance_max",
    creatives=("pmax_asset_group_1", "pmax_asset_group_2"),
    placements=("search", "display", "video"),
    audiences=("custom_segment", "broad"),
    geos=GEOS,
    budget_headroom=(0.8, 4.0),
    target_cpc=1.1,
    ctr={"search": 0.038, "display": 0.0055, "video": 0.0065},
    cvr={"search": 0.034, "display": 0.009, "video": 0.006},
    rank_offset=0.2,
    competitors=("megamart.example", "dealhub.example", "trendly.example"),
    audience_universe=1.2,
    volume=6.5,
    bidding="target_cpa",
)
REMARKETING = CampaignSpec(
    name="remarketing",
    kind="display",
    creatives=("rmkt_banner_1", "rmkt_banner_2"),
    placements=("display", "video"),
    audiences=("remarketing", "customer_match"),
    geos=US,
    budget_headroom=(1.2, 5.0),
    target_cpc=0.7,
    ctr={"display": 0.0045, "video": 0.005},
    cvr={"display": 0.0075, "video": 0.005},
    rank_offset=0.6,
    competitors=(),  # display auctions have no auction-insights report
    audience_universe=0.35,
    volume=25.0,
    bidding=MANUAL_CPC,
)
DEFAULT_CAMPAIGNS: tuple[CampaignSpec, ...] = (BRAND, GENERIC, PMAX, REMARKETING)
# Two manual-CPC campaigns (so a bid adjustment written across campaigns acts on both), brand
# search and Performance Max, in two geos.
SMALL_CAMPAIGNS: tuple[CampaignSpec, ...] = (
    replace(BRAND, geos=("us_west", "uk")),
    replace(GENERIC, geos=("us_west",), audiences=("in_market", "broad")),
    replace(PMAX, geos=("us_west", "uk")),
    replace(REMARKETING, geos=("us_west",)),
)


EDIT_TIMINGS = ("day", "hour")  # AdsConfig.edit_timing
FATIGUE_MODELS = ("cumulative", "frequency")  # AdsConfig.fatigue
# Campaign kinds whose creatives can fatigue with frequency (fatigue="frequency"): display
# and Performance Max (display and video inventory shows one ad to the same people again);
# a search ad is shown once per query.
FREQUENCY_KINDS = ("display", "performance_max")
FREQUENCY_PLACEMENTS = ("display", "video")


@dataclass(frozen=True)
class AdsConfig:
    """The ads account and simulation settings (see ``domains/ads/conf/domain/ads*.yaml``)."""

    campaigns: tuple[CampaignSpec, ...] = DEFAULT_CAMPAIGNS
    start: str = "2026-01-05"
    days: int = 56
    hourly_days: int = 14
    currency: str = "USD"
    # Volume and rates (account-wide multipliers of the per-segment baselines).
    daily_auctions_per_cell: float = 7500.0
    auction_dispersion: float = 40.0  # negative-binomial shape: day-to-day overdispersion
    base_tag_fire_rate: float = 0.96
    safari_tag_fire_rate: float = 0.90  # tracking prevention already costs Safari some tags
    average_order_value: float = 85.0
    bot_click_rate: float = 0.0004
    invalid_filter_rate: float = 0.65
    overdelivery: float = 1.2  # spend may exceed the daily budget by this factor on a day
    # --- Budget rules (issue 39; helper-3's block) -------------------------------------------
    # With ``budget_rules`` pacing keeps to the platform's rules against the daily budget
    # (mechanisms.BudgetRules): a campaign is throttled once a day's demand reaches
    # ``budget_pacing_onset`` x its budget and then serves at most 1 - ``budget_min_throttle``
    # of that demand (so a campaign held by its budget always loses impression share to it);
    # a throttled day spends the budget times the day's demand over the week's (busy days
    # more, quiet days less), never more than ``budget_day_cap`` x the budget on a day nor
    # more than the budgets over any ``budget_month_days`` window. The pacing aims
    # ``budget_margin`` under the month's limit and 4x that under the day's (billed clicks
    # scatter around the expected spend). Off (the default, and every committed manifest,
    # which does not record the key): the fixed ``overdelivery`` pacing of before.
    budget_rules: bool = False
    budget_pacing_onset: float = 0.9
    budget_min_throttle: float = 0.05
    budget_day_cap: float = 2.0
    budget_month_days: tuple[int, int] = (28, 31)
    budget_margin: float = 0.03
    weekly_amplitude: float = 0.24
    trend_per_week: float = 0.01
    holidays: tuple[str, ...] = ("2026-02-14",)
    # The holiday's gift demand ramps up over this many days before it and drops on the day.
    holiday_ramp_days: int = 10
    holiday_lift: float = 0.3
    # CVR by weekday (Monday first): shoppers convert best early in the week.
    weekday_cvr: tuple[float, ...] = (1.07, 1.05, 1.02, 1.0, 0.95, 0.92, 0.99)
    # Conversions keep arriving after the click (reported by click date): the share reported
    # by age k days is 1 - fast_share exp(-(k + 1) / fast_days) - (1 - fast_share)
    # exp(-(k + 1) / slow_days): about half on the day, a tail of 2-4 weeks.
    lag_fast_share: float = 0.7
    lag_fast_days: float = 1.0
    lag_slow_days: float = 10.0
    # Consent: share of users whose conversions and sessions can be measured, by geo (EU and
    # UK banners); the platform models back part of what consent hides, and counts cross-device
    # and view-through conversions the backend attributes elsewhere (by placement).
    consent_rate: Mapping[str, float] = field(
        default_factory=lambda: {"uk": 0.72, "germany": 0.64, "france": 0.68}
    )
    consent_modelled_share: float = 0.6
    modelled_rate: Mapping[str, float] = field(
        default_factory=lambda: {
            "search": 0.04,
            "search_partners": 0.04,
            "display": 0.3,
            "video": 0.35,
        }
    )
    sessions_per_click: float = 0.9  # before consent: clicks that land and are counted
    # Auction volatility: day-to-day noise of competitors' bids per campaign and network.
    auction_volatility: float = 0.1
    # Episodes: where onsets may fall, counted back from the last day.
    onset_window: tuple[int, int] = (-14, -4)
    alert_window_days: int = 7
    baseline_weeks: int = 4
    # The monitor's baseline also leaves out each scope's days without delivery (a billing
    # suspension, a paused campaign, an outage), reads the conversion-delay curve as the
    # conversion_lag_curve table prints it, and every alert line names the days it left out
    # and why, so its numbers can be reproduced from the prompt and the tables. Off: the
    # monitor and prompt of the committed splits (their manifests do not record this key).
    alert_baseline_disclosed: bool = False
    decoy_edits: tuple[int, int] = (4, 10)
    # -- Edit timing and creative fatigue (issue 39, physics). The committed splits' manifests
    # do not record these keys: their defaults are what those splits were generated with.
    # ``edit_timing``: "day" (an account edit acts from midnight of its day, hours before its
    # change-history timestamp) or "hour" (it acts from the hour the change history shows:
    # the edit day's daily values hold the partial day, weighted by the share of the day's
    # traffic after the edit, and perf_hourly shows the hours before it as they were). Applies
    # to the causes that log an edit (BUDGET_CAP, BID_MODIFIER_CHANGE, TARGETING_EXPANSION),
    # their twins and the effectful decoy edits.
    edit_timing: str = "day"
    # ``fatigue``: "cumulative" (CREATIVE_FATIGUE decays a creative's CTR with the impressions
    # it served since onset, on any creative) or "frequency" (it is drawn only on creatives of
    # campaigns where frequency can build, and acts on their display and video traffic: the
    # creative's audience stops renewing, so its frequency, impressions per reached user as
    # reach_frequency_daily reports it, climbs over days, and its CTR decays with that rise;
    # see ``causes._fatigue`` for why).
    fatigue: str = "cumulative"
    # ``twin_attributes``: a table of the accepted causes' edit attributes
    # (domains/ads/twin_attributes.py; a name under conf/twin_attributes/ or a path) that the
    # twins of BID_MODIFIER_CHANGE and TARGETING_EXPANSION draw their target, size, reach and
    # day from, jointly (issue 46); None: the hand-fitted quantiles of TwinPrior, as the
    # committed splits were made (their manifests do not record this key).
    twin_attributes: str | None = None
    # Overrides of the background prior (domains/ads/background.py, BackgroundPrior): how many
    # concurrent processes and decoys an episode has and how often one touches the alert window.
    background: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def unthrottled_spend(self) -> float:
        """The most a campaign spends in a day, as a multiple of its budget, before pacing
        throttles it: ``budget_pacing_onset`` under the budget rules, else ``overdelivery``
        (what a budget edit that must not bind leaves room for)."""
        return self.budget_pacing_onset if self.budget_rules else self.overdelivery

    def __post_init__(self) -> None:
        for key, allowed in (("edit_timing", EDIT_TIMINGS), ("fatigue", FATIGUE_MODELS)):
            if getattr(self, key) not in allowed:
                raise CausalTraceError(
                    f"ads domain: {key} must be one of {list(allowed)}, got {getattr(self, key)!r}"
                )

    @property
    def geos(self) -> tuple[str, ...]:
        return _ordered_union(c.geos for c in self.campaigns)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> AdsConfig:
        """Build from a plain or OmegaConf mapping; unknown keys raise, naming the key."""
        data = dict(data or {})
        preset = data.pop("preset", "default")
        base = PRESETS.get(preset)
        if base is None:
            raise CausalTraceError(
                f"ads domain: unknown preset {preset!r}; known: {sorted(PRESETS)}"
            )
        for key in ("name", "_target_"):
            data.pop(key, None)
        if "campaigns" in data:
            data["campaigns"] = tuple(_campaign(c) for c in data["campaigns"])
        data = typed_overrides(cls, data, "ads domain config")
        return replace(base, **data)


def _campaign(spec: Any) -> CampaignSpec:
    if isinstance(spec, CampaignSpec):
        return spec
    spec = dict(spec)
    try:
        return CampaignSpec(**{k: _plain(v) for k, v in spec.items()})
    except TypeError as exc:
        raise CausalTraceError(
            f"ads domain: bad campaign spec {spec.get('name', spec)!r}: {exc}"
        ) from None


def _plain(value: Any) -> Any:
    """OmegaConf lists become tuples and mappings dicts (specs are frozen)."""
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ListConfig":
        return tuple(value)
    return value


def _ordered_union(groups) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        for item in group:
            seen.setdefault(item, None)
    return tuple(seen)


PRESETS: dict[str, AdsConfig] = {
    "default": AdsConfig(),
    # Six weeks ending where the default's eight do: the holiday falls in the baseline weeks
    # (which leave its season out), not in the alert window.
    "small": AdsConfig(
        campaigns=SMALL_CAMPAIGNS,
        start="2026-01-19",
        days=42,
        hourly_days=7,
        onset_window=(-12, -4),
        decoy_edits=(3, 6),
    ),
}
