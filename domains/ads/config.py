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
    """

    name: str
    kind: str
    creatives: tuple[str, ...]
    placements: tuple[str, ...]
    audiences: tuple[str, ...]
    geos: tuple[str, ...]
    budget_headroom: float
    target_cpc: float


GEOS = ("us_west", "us_central", "us_east", "us_south", "canada", "uk", "germany", "france")
US = GEOS[:4]
AUDIENCES = ("remarketing", "customer_list", "in_market", "lookalike", "broad")
PLACEMENTS = ("search", "search_partners", "display", "video")

DEFAULT_CAMPAIGNS: tuple[CampaignSpec, ...] = (
    CampaignSpec(
        "brand_search",
        "search",
        ("brand_rsa_1", "brand_rsa_2"),
        ("search", "search_partners"),
        ("remarketing", "in_market"),
        GEOS,
        1.4,
        0.9,
    ),
    CampaignSpec(
        "generic_search",
        "search",
        ("generic_rsa_1", "generic_rsa_2"),
        ("search", "search_partners", "display"),  # search with display expansion
        ("in_market", "broad"),
        US,
        0.95,
        2.2,
    ),
    CampaignSpec(
        "pmax_prospecting",
        "performance_max",
        ("pmax_asset_group_1", "pmax_asset_group_2"),
        ("search", "display", "video"),
        ("lookalike", "broad"),
        GEOS,
        1.3,
        1.1,
    ),
    CampaignSpec(
        "remarketing",
        "display",
        ("rmkt_banner_1", "rmkt_banner_2"),
        ("display", "video"),
        ("remarketing", "customer_list"),
        US,
        1.6,
        0.7,
    ),
)

SMALL_CAMPAIGNS: tuple[CampaignSpec, ...] = (
    CampaignSpec(
        "brand_search",
        "search",
        ("brand_rsa_1", "brand_rsa_2"),
        ("search", "search_partners"),
        ("remarketing", "in_market"),
        ("us_west", "uk"),
        1.4,
        0.9,
    ),
    CampaignSpec(
        "pmax_prospecting",
        "performance_max",
        ("pmax_asset_group_1", "pmax_asset_group_2"),
        ("search", "display", "video"),
        ("lookalike", "broad"),
        ("us_west", "uk"),
        1.3,
        1.1,
    ),
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
    base_ctr: float = 0.035
    base_cvr: float = 0.045
    base_tag_fire_rate: float = 0.96
    safari_tag_fire_rate: float = 0.90  # tracking prevention already costs Safari some tags
    average_order_value: float = 85.0
    bot_click_rate: float = 0.0004
    invalid_filter_rate: float = 0.65
    overdelivery: float = 1.2  # spend may exceed the daily budget by this factor on a day
    weekly_amplitude: float = 0.18
    trend_per_week: float = 0.01
    holidays: tuple[str, ...] = ("2026-02-14",)
    competitors: tuple[str, ...] = ("shopfast.example", "megamart.example", "dealhub.example")
    # Conversions keep arriving after the click: fraction reported after k days is
    # 1 - exp(-(k + 1) / conversion_lag_days).
    conversion_lag_days: float = 1.6
    # Episodes: where onsets may fall, counted back from the last day.
    onset_window: tuple[int, int] = (-14, -4)
    alert_window_days: int = 7
    baseline_weeks: int = 4
    decoy_edits: tuple[int, int] = (4, 10)
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
        for key in ("holidays", "competitors", "onset_window", "decoy_edits"):
            if key in data:
                data[key] = tuple(data[key])
        return replace(base, **data)


def _campaign(spec: Any) -> CampaignSpec:
    if isinstance(spec, CampaignSpec):
        return spec
    spec = dict(spec)
    try:
        return CampaignSpec(
            **{k: tuple(v) if isinstance(v, list | tuple) else v for k, v in spec.items()}
        )
    except TypeError as exc:
        raise CausalTraceError(
            f"ads domain: bad campaign spec {spec.get('name', spec)!r}: {exc}"
        ) from None


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
