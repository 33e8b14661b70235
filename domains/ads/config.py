"""Configuration of the ads domain: account structure, horizon and noise levels.

Every number an analyst would recognise (budgets, CPCs, CTRs, conversion rates) lives here, so a
preset is a different account, not a different program. ``AdsConfig.from_mapping`` builds one
from a Hydra/OmegaConf mapping and names any unknown key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from causaltrace.errors import CausalTraceError

DEVICE_BROWSERS: dict[str, tuple[str, ...]] = {
    "mobile": ("ios_safari", "android_chrome"),
    "desktop": ("desktop_chrome", "mac_safari"),
    "tablet": ("ios_safari",),
    "ctv": ("other",),
}


@dataclass(frozen=True)
class CampaignSpec:
    """One campaign: its type, the creatives, placements, audiences and geos it serves.

    ``budget_headroom`` sets the daily budget as a multiple of the campaign's typical
    unconstrained spend (below about 1.1 the campaign is budget-limited on busy days);
    ``target_cpc`` is the campaign's average max CPC in account currency. Placements,
    audiences and geos are the campaign's targeting: cells outside it do not exist in the panel.
    ``ctv`` devices exist only on the ``video`` placement.

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
    budget_headroom: float
    target_cpc: float
    ctr: Mapping[str, float] = field(default_factory=dict)
    cvr: Mapping[str, float] = field(default_factory=dict)
    rank_offset: float = 0.3
    competitors: tuple[str, ...] = ()
    audience_universe: float = 4.0

    def __post_init__(self) -> None:
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


GEOS = ("us_west", "us_central", "us_east", "us_south", "canada", "uk", "germany", "france")
US = GEOS[:4]
EU_UK = ("uk", "germany", "france")  # consent banners: fewer tagged conversions and sessions
AUDIENCES = ("remarketing", "customer_list", "in_market", "lookalike", "broad")
PLACEMENTS = ("search", "search_partners", "display", "video")

BRAND = CampaignSpec(
    name="brand_search",
    kind="search",
    creatives=("brand_rsa_1", "brand_rsa_2"),
    placements=("search", "search_partners"),
    audiences=("remarketing", "in_market"),
    geos=GEOS,
    budget_headroom=1.4,
    target_cpc=0.9,
    ctr={"search": 0.15, "search_partners": 0.045},
    cvr={"search": 0.085, "search_partners": 0.055},
    rank_offset=2.2,
    competitors=("shopfast.example", "coupon-rocket.example"),
    audience_universe=4.0,
)
GENERIC = CampaignSpec(
    name="generic_search",
    kind="search",
    creatives=("generic_rsa_1", "generic_rsa_2"),
    placements=("search", "search_partners", "display"),  # search with display expansion
    audiences=("in_market", "broad"),
    geos=US,
    budget_headroom=0.95,
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
)
PMAX = CampaignSpec(
    name="pmax_prospecting",
    kind="performance_max",
    creatives=("pmax_asset_group_1", "pmax_asset_group_2"),
    placements=("search", "display", "video"),
    audiences=("lookalike", "broad"),
    geos=GEOS,
    budget_headroom=1.3,
    target_cpc=1.1,
    ctr={"search": 0.038, "display": 0.0055, "video": 0.0065},
    cvr={"search": 0.034, "display": 0.009, "video": 0.006},
    rank_offset=0.2,
    competitors=("megamart.example", "dealhub.example", "trendly.example"),
    audience_universe=1.2,
)
REMARKETING = CampaignSpec(
    name="remarketing",
    kind="display",
    creatives=("rmkt_banner_1", "rmkt_banner_2"),
    placements=("display", "video"),
    audiences=("remarketing", "customer_list"),
    geos=US,
    budget_headroom=1.6,
    target_cpc=0.7,
    ctr={"display": 0.0045, "video": 0.005},
    cvr={"display": 0.0075, "video": 0.005},
    rank_offset=0.6,
    competitors=(),  # display auctions have no auction-insights report
    audience_universe=0.35,
)
DEFAULT_CAMPAIGNS: tuple[CampaignSpec, ...] = (BRAND, GENERIC, PMAX, REMARKETING)
SMALL_CAMPAIGNS: tuple[CampaignSpec, ...] = (
    replace(BRAND, geos=("us_west", "uk")),
    replace(PMAX, geos=("us_west", "uk")),
)


@dataclass(frozen=True)
class AdsConfig:
    """The ads account and simulation settings (see ``configs/domain/ads*.yaml``)."""

    campaigns: tuple[CampaignSpec, ...] = DEFAULT_CAMPAIGNS
    start: str = "2026-01-05"
    days: int = 56
    hourly_days: int = 14
    currency: str = "USD"
    # Volume and rates (account-wide multipliers of the per-segment baselines).
    daily_auctions_per_cell: float = 2500.0
    auction_dispersion: float = 40.0  # negative-binomial shape: day-to-day overdispersion
    base_tag_fire_rate: float = 0.96
    safari_tag_fire_rate: float = 0.90  # tracking prevention already costs Safari some tags
    average_order_value: float = 85.0
    bot_click_rate: float = 0.0004
    invalid_filter_rate: float = 0.65
    overdelivery: float = 1.2  # spend may exceed the daily budget by this factor on a day
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
    decoy_edits: tuple[int, int] = (4, 10)
    # Overrides of the background prior (domains/ads/background.py, BackgroundPrior): how many
    # concurrent processes and decoys an episode has and how often one touches the alert window.
    background: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

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
        known = {f.name for f in fields(cls)}
        for key in ("name", "_target_"):
            data.pop(key, None)
        unknown = sorted(set(data) - known)
        if unknown:
            raise CausalTraceError(
                f"ads domain config: unknown key(s) {unknown}; known: {sorted(known)}"
            )
        if "campaigns" in data:
            data["campaigns"] = tuple(_campaign(c) for c in data["campaigns"])
        for key in ("holidays", "onset_window", "decoy_edits", "weekday_cvr"):
            if key in data:
                data[key] = tuple(data[key])
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
    "small": AdsConfig(
        campaigns=SMALL_CAMPAIGNS,
        days=42,
        hourly_days=7,
        onset_window=(-12, -4),
        decoy_edits=(3, 6),
    ),
}
