"""Background processes of the ads domain: what happens in an account whatever the episode's
cause, in the factual and the counterfactual world alike.

Every episode carries one to four documented processes an analyst meets every week
(promotions, smart-bidding learning periods, auction volatility, a paused campaign, Performance
Max taking brand queries, tracking changes that are not outages), plus decoy edits that look
plausible. Each process has its own prior (a frozen dataclass with defaults, collected in
:class:`BackgroundPrior`), its own interventions and the change-history rows a real account
would log for it (none for what happens outside the ads account). An edit that changes
something in the model carries its intervention; an edit flagged ``harmless`` carries none.

Timing: with probability ``alert_probability`` one process (chosen by ``alert_weight``) is
placed so that it *touches the alert window* (its weight is non-zero on one of the last
``alert_window_days`` days and not constant over the baseline weeks and the alert window); all
others are placed where they cannot: transient processes end before the alert window, lasting
ones are settled before the baseline weeks start. See docs/domain-ads.md (background processes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from causaltrace import (
    Background,
    BackgroundChange,
    Decay,
    InterventionDraw,
    InterventionPoint,
    Panel,
    Ramp,
    Scale,
    Slice,
    Window,
)
from causaltrace.core.config import typed_overrides
from causaltrace.errors import CausalTraceError
from causaltrace_domains.ads.account_state import AccountState, StatePrior, sample_state
from causaltrace_domains.ads.causes import EditTiming, timing_of
from causaltrace_domains.ads.config import US, AdsConfig, CampaignSpec
from causaltrace_domains.ads.records import Calendar, Edit, Process
from causaltrace_domains.ads.twins import (
    TwinContext,
    TwinPrior,
    incident_campaigns,
    sample_twins,
)

PEOPLE = ("anna.k@agency.example", "li.m@brand.example", "j.osei@agency.example")
RULES_USER = "automated_rules"
USERS = (*PEOPLE, RULES_USER)  # who makes an edit when its process does not say
SYSTEM_USER = "system"  # billing suspensions are logged by the platform, not by a person
ACCOUNT = "account"  # the target of account-level edits (their campaign column is empty)
# Automated rules can pause and enable campaigns and change budgets and bids; they cannot edit
# targeting, schedules, ads, assets or keywords: such rows are a person's.
RULE_FIELDS = ("status", "daily_budget", "bid_adjustment")
COUNTRY_NAMES = {"us": "the US", "uk": "the UK", "canada": "Canada"}
# Background kinds no cause of the domain looks like: a sale the account announced moves
# conversion rate and order value together, which no cause does. Every other kind reads as one
# (auction volatility as competitive pressure, a consent change as a tracking outage, a learning
# period or a paused campaign as an edit's effect), so only a sale may raise a NO_ANOMALY page.
UNNAMEABLE = ("promotion",)


# -- priors -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromotionPrior:
    """A sitewide or one-country sale: CVR up, order value down, between two days."""

    weight: float = 0.25
    alert_weight: float = 1.0
    sitewide_probability: float = 0.6
    days: tuple[int, int] = (3, 14)
    cvr_factor: tuple[float, float] = (1.15, 1.4)
    order_value_factor: tuple[float, float] = (0.8, 0.92)
    # The advertised discount is about this multiple of the fall of the order value (not every
    # item is on sale, baskets grow), rounded to 5%.
    discount_per_order_value_drop: float = 1.5
    carrier_kinds: tuple[str, ...] = ("search", "performance_max")  # campaigns with promo assets


@dataclass(frozen=True)
class LearningPeriodPrior:
    """Smart bidding relearns after a target-CPA edit: CPC up, CVR down, fading out."""

    weight: float = 0.2
    alert_weight: float = 1.0
    days: tuple[int, int] = (5, 14)
    half_life: tuple[float, float] = (2.0, 5.0)
    cpc_factor: tuple[float, float] = (1.1, 1.3)
    cvr_factor: tuple[float, float] = (0.85, 0.95)
    target_change: tuple[float, float] = (0.1, 0.25)  # |new / old target CPA - 1|


@dataclass(frozen=True)
class AuctionVolatilityPrior:
    """A competitor enters (or leaves) one campaign's search auctions for a while."""

    weight: float = 0.2
    alert_weight: float = 1.0
    days: tuple[int, int] = (5, 20)
    entry_probability: float = 0.6
    entry_factor: tuple[float, float] = (1.1, 1.3)
    exit_factor: tuple[float, float] = (0.8, 0.9)
    newcomers: tuple[str, ...] = ("flashcart.example", "bargainly.example", "shopnest.example")


@dataclass(frozen=True)
class CampaignPausePrior:
    """A campaign (or a campaign in one geo, or the account after a billing failure) stops
    serving for whole days, then serves again."""

    weight: float = 0.1
    alert_weight: float = 0.3
    days: tuple[int, int] = (1, 3)
    geo_probability: float = 0.25  # the geo's location target excluded, then restored
    billing_probability: float = 0.15  # the whole account suspended: payment declined
    rule_probability: float = 0.4  # of campaign pauses: by an automated rule, else a person


@dataclass(frozen=True)
class CannibalisationPrior:
    """Performance Max's search placement starts taking brand queries from brand search."""

    weight: float = 0.1
    alert_weight: float = 1.0
    share: tuple[float, float] = (0.05, 0.2)  # s: brand search demand x (1 - s)
    transfer: tuple[float, float] = (0.5, 1.5)  # PMax search demand x (1 + s t)
    ramp_days: tuple[int, int] = (3, 7)
    logged_probability: float = 0.5  # logged as search themes added to an asset group


@dataclass(frozen=True)
class ConsentChangePrior:
    """A consent-banner update in one EU/UK geo: fewer users consent to measurement."""

    weight: float = 0.075
    alert_weight: float = 1.0
    factor: tuple[float, float] = (0.85, 0.95)
    geos: tuple[str, ...] = ("uk", "germany", "france")


@dataclass(frozen=True)
class EnhancedConversionsPrior:
    """Enhanced conversions turned on: the tag records a few more conversions account-wide."""

    weight: float = 0.075
    alert_weight: float = 1.0
    factor: tuple[float, float] = (1.02, 1.04)


@dataclass(frozen=True)
class DecoyPrior:
    """Everyday edits besides the causes' twins (:mod:`causaltrace_domains.ads.twins`): budget
    raises on campaigns that are not budget-limited (they carry their budget intervention and
    change no delivery), small real bid adjustments, and harmless edits that carry none."""

    effectful: tuple[int, int] = (0, 2)  # budget raises and bid adjustments per episode
    effectful_weights: Mapping[str, float] = field(
        default_factory=lambda: {"budget_raise": 0.4, "bid_adjustment": 0.6}
    )
    budget_raise: tuple[float, float] = (1.15, 1.6)
    # A campaign whose budget is at least this multiple of its typical spend is not limited.
    unlimited_headroom: float = 1.35
    bid_adjustment_pct: tuple[int, int] = (10, 25)  # +- this much, with its intervention
    harmless_weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "audience_observation": 0.2,
            "ad_text": 0.3,
            "negative_keywords": 0.2,
            "ad_schedule": 0.15,
            "tracking_suffix": 0.15,
        }
    )


PROCESS_PRIORS: dict[str, type] = {
    "promotion": PromotionPrior,
    "learning_period": LearningPeriodPrior,
    "auction_volatility": AuctionVolatilityPrior,
    "campaign_pause": CampaignPausePrior,
    "pmax_cannibalisation": CannibalisationPrior,
    "consent_change": ConsentChangePrior,
    "enhanced_conversions": EnhancedConversionsPrior,
}


@dataclass(frozen=True)
class BackgroundPrior:
    """How many background processes an episode has, which, and where they fall."""

    count_weights: tuple[float, ...] = (0.3, 0.35, 0.25, 0.1)  # 1, 2, 3 or 4 processes
    alert_probability: float = 0.5  # one process touches the alert window
    promotion: PromotionPrior = PromotionPrior()
    learning_period: LearningPeriodPrior = LearningPeriodPrior()
    auction_volatility: AuctionVolatilityPrior = AuctionVolatilityPrior()
    campaign_pause: CampaignPausePrior = CampaignPausePrior()
    pmax_cannibalisation: CannibalisationPrior = CannibalisationPrior()
    consent_change: ConsentChangePrior = ConsentChangePrior()
    enhanced_conversions: EnhancedConversionsPrior = EnhancedConversionsPrior()
    decoys: DecoyPrior = DecoyPrior()
    twins: TwinPrior = field(default_factory=TwinPrior)
    state: StatePrior = field(default_factory=StatePrior)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> BackgroundPrior:
        """Defaults overridden by a (Hydra/OmegaConf) mapping; unknown keys raise by name."""
        data = dict(data or {})
        sub = {
            **{k: PROCESS_PRIORS[k] for k in PROCESS_PRIORS},
            "decoys": DecoyPrior,
            "twins": TwinPrior,
            "state": StatePrior,
        }
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key in sub:
                values[key] = _dataclass_from(sub[key], value, f"background.{key}")
            elif key in ("count_weights", "alert_probability"):
                values[key] = tuple(value) if key == "count_weights" else float(value)
            else:
                known = sorted([*sub, "count_weights", "alert_probability"])
                raise CausalTraceError(f"ads background: unknown key {key!r}; known: {known}")
        return replace(cls(), **values)


def _dataclass_from(cls: type, data: Any, where: str):
    if isinstance(data, cls):
        return data
    return replace(cls(), **typed_overrides(cls, data, f"ads {where}"))


def background_prior(config: AdsConfig) -> BackgroundPrior:
    """The prior in ``config.background`` if the config has one, else the defaults."""
    raw = getattr(config, "background", None)
    if raw is None:
        return BackgroundPrior()
    if isinstance(raw, BackgroundPrior):
        return raw
    return BackgroundPrior.from_mapping(raw)


# -- records ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Account:
    """What the account serves: its campaigns and the levels each one serves."""

    panel: Panel
    campaigns: tuple[CampaignSpec, ...]

    @classmethod
    def of(cls, panel: Panel, config: AdsConfig) -> Account:
        levels = set(panel.dimension("campaign").levels)
        specs = tuple(c for c in config.campaigns if c.name in levels)
        return cls(panel, tuple(c for c in specs if Slice.of(campaign=c.name).mask(panel).any()))

    def serves(self, campaign: str, **levels: str) -> bool:
        return bool(Slice.of(campaign=campaign, **levels).mask(self.panel).any())

    def levels(self, campaign: str, dim: str) -> tuple[str, ...]:
        """The levels of ``dim`` the campaign serves, in the panel's order."""
        mask = self.panel.labels("campaign") == campaign
        present = set(self.panel.labels(dim)[mask].tolist())
        return tuple(level for level in self.panel.dimension(dim).levels if level in present)

    def names(self, specs: Sequence[CampaignSpec] | None = None) -> tuple[str, ...]:
        return tuple(c.name for c in (self.campaigns if specs is None else specs))

    def smart_bidding(self) -> tuple[CampaignSpec, ...]:
        return tuple(c for c in self.campaigns if c.smart_bidding)

    def on_search(self) -> tuple[CampaignSpec, ...]:
        return tuple(c for c in self.campaigns if self.serves(c.name, placement="search"))


def _pick(rng: np.random.Generator, items: Sequence):
    return items[int(rng.integers(len(items)))]


def _uniform(rng: np.random.Generator, bounds: tuple[float, float]) -> float:
    lo, hi = bounds
    return float(rng.uniform(lo, hi))


def _integer(rng: np.random.Generator, bounds: tuple[int, int]) -> int:
    lo, hi = bounds
    return int(rng.integers(lo, hi + 1))


def _date(panel: Panel, day: int) -> str:
    """The date of step ``day`` (which may lie past the panel's end)."""
    return str(panel.time.values.astype("datetime64[D]")[0] + np.timedelta64(day, "D"))


# -- processes --------------------------------------------------------------------------------


def _promotion(p: PromotionPrior, acc: Account, cal: Calendar, rng, in_alert: bool) -> Process:
    panel = acc.panel
    geos = panel.dimension("geo").levels
    countries: dict[str, list[str]] = {}
    for g in geos:
        countries.setdefault("us" if g in US else g, []).append(g)
    sitewide = bool(rng.random() < p.sitewide_probability)
    country = _pick(rng, tuple(countries))
    scope = list(geos) if sitewide else countries[country]
    length = _integer(rng, p.days)
    onset = cal.transient(rng, length, in_alert)
    end = onset + length
    cvr, order_value = _uniform(rng, p.cvr_factor), _uniform(rng, p.order_value_factor)
    discount = max(5, 5 * round((1.0 - order_value) * 100 * p.discount_per_order_value_drop / 5))
    window = Window(onset, end)
    slices = [Slice()] if sitewide else [Slice.of(geo=g) for g in scope]
    interventions = tuple(
        Scale(node, where=sl, window=window, factor=f)
        for sl in slices
        for node, f in (("cvr", cvr), ("order_value", order_value))
    )
    where = "sitewide" if sitewide else f"in {COUNTRY_NAMES.get(country, country.title())}"
    text = f"{discount}% off {where} until {_date(panel, end - 1)}"
    carriers = [
        c.name
        for c in acc.campaigns
        if c.kind in p.carrier_kinds and any(acc.serves(c.name, geo=g) for g in scope)
    ]
    start_hour, end_hour = int(rng.integers(0, 9)), int(rng.integers(0, 9))
    edits = [
        Edit(onset, start_hour, c, "asset", "campaign", "promotion", "", text) for c in carriers
    ]
    if end < cal.n_time:  # the promotion asset is removed when the sale is over
        edits += [
            Edit(end, end_hour, c, "asset", "campaign", "promotion", text, "") for c in carriers
        ]
    details = {
        "scope": "sitewide" if sitewide else country,
        "geos": tuple(scope),
        "onset": onset,
        "end": end,
        "cvr_factor": cvr,
        "order_value_factor": order_value,
        "discount": discount,
        "carriers": tuple(carriers),
    }
    return Process("promotion", interventions, tuple(edits), details)


def _learning_period(
    p: LearningPeriodPrior, acc: Account, cal: Calendar, rng, in_alert: bool
) -> Process:
    campaign = _pick(rng, acc.names(acc.smart_bidding()))
    length, half_life = _integer(rng, p.days), _uniform(rng, p.half_life)
    onset = cal.transient(rng, length, in_alert)
    cpc, cvr = _uniform(rng, p.cpc_factor), _uniform(rng, p.cvr_factor)
    change = _uniform(rng, p.target_change) * (1.0 if rng.random() < 0.5 else -1.0)
    window = Window(onset, onset + length, Decay(half_life))
    where = Slice.of(campaign=campaign)
    interventions = (
        Scale("expected_cpc", where=where, window=window, factor=cpc),
        Scale("cvr", where=where, window=window, factor=cvr),
    )
    hour = int(rng.integers(7, 20))
    edit = Edit(
        onset, hour, campaign, "bidding", "campaign", "target_cpa", "", "", cpa_ratio=1.0 + change
    )
    details = {
        "campaign": campaign,
        "onset": onset,
        "end": onset + length,
        "half_life": half_life,
        "cpc_factor": cpc,
        "cvr_factor": cvr,
        "target_change": change,
    }
    return Process("learning_period", interventions, (edit,), details)


def _auction_volatility(
    p: AuctionVolatilityPrior, acc: Account, cal: Calendar, rng, in_alert: bool
) -> Process:
    spec = _pick(rng, acc.on_search())
    length = _integer(rng, p.days)
    onset = cal.transient(rng, length, in_alert)
    entry = bool(rng.random() < p.entry_probability) or not spec.competitors
    factor = _uniform(rng, p.entry_factor if entry else p.exit_factor)
    competitor = _pick(rng, p.newcomers if entry else spec.competitors)
    iv = Scale(
        "competitor_pressure",
        where=Slice.of(campaign=spec.name, placement="search"),
        window=Window(onset, onset + length),
        factor=factor,
    )
    details = {
        "campaign": spec.name,
        "direction": "entry" if entry else "exit",
        "competitor": competitor,
        "onset": onset,
        "end": onset + length,
        "factor": factor,
    }
    return Process("auction_volatility", (iv,), (), details)


def _campaign_pause(
    p: CampaignPausePrior, acc: Account, cal: Calendar, rng, in_alert: bool
) -> Process:
    length = _integer(rng, p.days)
    # Serving resumes by the last day, so the campaigns table's "enabled" is current.
    onset = cal.transient(rng, length, in_alert, last_end=cal.n_time - 1)
    end = onset + length
    window = Window(onset, end)
    h_off, h_on = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    draw = rng.random()
    campaign = _pick(rng, acc.names())
    geo = _pick(rng, acc.levels(campaign, "geo"))
    user = _pick(rng, PEOPLE)
    if draw < p.billing_probability:  # the account is suspended until the payment goes through
        scope, where, user = "account", Slice(), SYSTEM_USER
        declined = "suspended: payment declined"
        edits = (
            Edit(onset, h_off, "", "billing", ACCOUNT, "account_status", "active", declined, user),
            Edit(end, h_on, "", "billing", ACCOUNT, "account_status", declined, "active", user),
        )
    elif draw < p.billing_probability + p.geo_probability:  # one geo excluded, then restored
        scope, where = "geo", Slice.of(campaign=campaign, geo=geo)
        target = f"geo={geo}"
        edits = (
            Edit(
                onset,
                h_off,
                campaign,
                "targeting",
                target,
                "location",
                "targeted",
                "excluded",
                user,
            ),
            Edit(
                end, h_on, campaign, "targeting", target, "location", "excluded", "targeted", user
            ),
        )
    else:
        scope, where = "campaign", Slice.of(campaign=campaign)
        if rng.random() < p.rule_probability:
            user = RULES_USER
        edits = (
            Edit(
                onset, h_off, campaign, "campaign", "campaign", "status", "enabled", "paused", user
            ),
            Edit(end, h_on, campaign, "campaign", "campaign", "status", "paused", "enabled", user),
        )
    iv = Scale("campaign_enabled", where=where, window=window, factor=0.0)
    details = {
        "scope": scope,
        "campaign": "" if scope == "account" else campaign,
        "geo": geo if scope == "geo" else "",
        "onset": onset,
        "end": end,
        "user": user,
    }
    return Process("campaign_pause", (iv,), edits, details)


def _cannibalisation_pair(acc: Account) -> tuple[str, str] | None:
    brand = [c.name for c in acc.campaigns if c.kind == "search" and "brand" in c.name]
    pmax = [
        c.name
        for c in acc.campaigns
        if c.kind == "performance_max" and acc.serves(c.name, placement="search")
    ]
    return (brand[0], pmax[0]) if brand and pmax else None


def _pmax_cannibalisation(
    p: CannibalisationPrior, acc: Account, cal: Calendar, rng, in_alert: bool
) -> Process:
    brand, pmax = _cannibalisation_pair(acc)
    share, transfer = _uniform(rng, p.share), _uniform(rng, p.transfer)
    steps = _integer(rng, p.ramp_days)
    onset = cal.lasting(rng, steps - 1, in_alert)
    window = Window(onset, profile=Ramp(steps))
    interventions = (
        Scale("market_demand", where=Slice.of(campaign=brand), window=window, factor=1 - share),
        Scale(
            "market_demand",
            where=Slice.of(campaign=pmax, placement="search"),
            window=window,
            factor=1 + share * transfer,
        ),
    )
    logged = bool(rng.random() < p.logged_probability)
    group = _pick(rng, acc.levels(pmax, "creative"))
    themes = int(rng.integers(5, 15))
    added = int(rng.integers(2, 6))
    edits = ()
    if logged:
        edits = (
            Edit(
                onset,
                int(rng.integers(7, 20)),
                pmax,
                "asset",
                f"creative={group}",
                "search_themes",
                f"{themes} themes",
                f"{themes + added} themes",
            ),
        )
    details = {
        "brand_campaign": brand,
        "pmax_campaign": pmax,
        "onset": onset,
        "ramp_days": steps,
        "share": share,
        "gain": share * transfer,
        "logged": logged,
    }
    return Process("pmax_cannibalisation", interventions, edits, details)


def _consent_change(
    p: ConsentChangePrior, acc: Account, cal: Calendar, rng, in_alert: bool
) -> Process:
    geo = _pick(rng, _consent_geos(p, acc))
    factor = _uniform(rng, p.factor)
    onset = cal.lasting(rng, 0, in_alert)
    iv = Scale("consent_rate", where=Slice.of(geo=geo), window=Window(onset), factor=factor)
    details = {"geo": geo, "onset": onset, "factor": factor}
    return Process("consent_change", (iv,), (), details)  # a site change: not in the ads account


def _consent_geos(p: ConsentChangePrior, acc: Account) -> tuple[str, ...]:
    return tuple(g for g in acc.panel.dimension("geo").levels if g in p.geos)


def _enhanced_conversions(
    p: EnhancedConversionsPrior, acc: Account, cal: Calendar, rng, in_alert: bool, cap: float
) -> Process:
    factor = min(_uniform(rng, p.factor), cap)
    onset = cal.lasting(rng, 0, in_alert)
    iv = Scale("tag_fire_rate", window=Window(onset), factor=factor)
    hour = int(rng.integers(7, 20))
    edit = Edit(onset, hour, "", "conversions", ACCOUNT, "enhanced_conversions", "off", "on")
    return Process("enhanced_conversions", (iv,), (edit,), {"onset": onset, "factor": factor})


def eligible_kinds(prior: BackgroundPrior, acc: Account) -> dict[str, float]:
    """Process kind -> prior weight, for the kinds this account can have."""
    possible = {
        "promotion": any(c.kind in prior.promotion.carrier_kinds for c in acc.campaigns),
        "learning_period": bool(acc.smart_bidding()),
        "auction_volatility": bool(acc.on_search()),
        "campaign_pause": bool(acc.campaigns),
        "pmax_cannibalisation": _cannibalisation_pair(acc) is not None,
        "consent_change": bool(_consent_geos(prior.consent_change, acc)),
        "enhanced_conversions": True,
    }
    weights = {k: float(getattr(prior, k).weight) for k in PROCESS_PRIORS}
    return {k: w for k, w in weights.items() if possible[k] and w > 0}


# -- decoys -----------------------------------------------------------------------------------

SCHEDULE_EDIT = ("all days, all hours", "Mon-Fri all hours; Sat-Sun all hours")
SUFFIX_EDIT = ("utm_content={creative}", "utm_content={creative}&utm_term={keyword}")
AD_TEXT = (
    ("headline_3", "Free shipping over $50", "Free returns, always"),
    ("headline_2", "New arrivals weekly", "New styles every week"),
    ("description_1", "Shop the spring collection.", "Discover the spring collection."),
)


def _effectful_decoy(
    p: DecoyPrior,
    acc: Account,
    cal: Calendar,
    state: AccountState,
    rng,
    timing: EditTiming | None = None,
) -> Process:
    """A budget raise or a small bid adjustment, acting from its day (from its hour with
    ``timing``: ``edit_timing="hour"``)."""
    day, hour = int(rng.integers(cal.first_logged, cal.n_time)), int(rng.integers(7, 20))

    def window(where: Slice) -> Window:
        return Window(day) if timing is None else timing.window(Window(day), where, hour)

    unlimited = [c for c in acc.campaigns if state.headroom[c.name] >= p.unlimited_headroom]
    adjustable = [c for c in acc.campaigns if c.takes_bid_adjustments]
    available = {"budget_raise": unlimited, "bid_adjustment": adjustable}
    kinds = [k for k, w in p.effectful_weights.items() if w > 0 and available.get(k)]
    weights = np.array([p.effectful_weights[k] for k in kinds], dtype=np.float64)
    kind = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
    campaign = _pick(rng, acc.names(available[kind]))
    if kind == "budget_raise":  # a raise on a campaign that is not limited: does not bind
        factor = _uniform(rng, p.budget_raise)
        where = Slice.of(campaign=campaign)
        iv = Scale("budget_change", where=where, window=window(where), factor=factor)
        edit = Edit(
            day, hour, campaign, "budget", "campaign", "daily_budget", "", "", factor=factor
        )
        return Process(kind, (iv,), (edit,), {"campaign": campaign, "factor": factor})
    dim = _pick(rng, ("device", "geo", "audience"))
    level = _pick(rng, tuple(v for v in acc.levels(campaign, dim) if v != "ctv"))
    pct = _integer(rng, p.bid_adjustment_pct) * (1 if rng.random() < 0.5 else -1)
    where = Slice.of(campaign=campaign, **{dim: level})
    iv = Scale("bid_modifier", where=where, window=window(where), factor=1 + pct / 100)
    edit = Edit(
        day, hour, campaign, "bid_modifier", f"{dim}={level}", "bid_adjustment", "+0%", f"{pct:+d}%"
    )
    return Process("bid_adjustment", (iv,), (edit,), {"campaign": campaign, "pct": pct})


def _harmless_edit(p: DecoyPrior, acc: Account, cal: Calendar, rng) -> Edit:
    kinds = [k for k, w in p.harmless_weights.items() if w > 0]
    weights = np.array([p.harmless_weights[k] for k in kinds], dtype=np.float64)
    kind = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
    day, hour = int(rng.integers(cal.first_logged, cal.n_time)), int(rng.integers(7, 20))
    search = [c.name for c in acc.campaigns if c.kind == "search"]
    campaign = _pick(rng, acc.names())
    if kind == "negative_keywords" and search:  # queries that brought no traffic
        campaign = _pick(rng, search)
        before = int(rng.integers(8, 30))
        after = before + int(rng.integers(1, 6))
        edit = (
            "keywords",
            "campaign",
            "negative_keywords",
            f"{before} keywords",
            f"{after} keywords",
        )
    elif kind == "audience_observation" and search:  # a list added for reporting only
        campaign = _pick(rng, search)
        before = int(rng.integers(1, 4))
        edit = (
            "targeting",
            "campaign",
            "observed_audience_segments",
            f"{before} segments",
            f"{before + 1} segments",
        )
    elif kind == "ad_schedule":  # the schedule is split but keeps every hour
        edit = ("campaign", "campaign", "ad_schedule", *SCHEDULE_EDIT)
    elif kind == "tracking_suffix":
        edit = ("ad", "campaign", "final_url_suffix", *SUFFIX_EDIT)
    else:  # ad text of one of the campaign's own ads
        creative = _pick(rng, acc.levels(campaign, "creative"))
        field_name, old, new = _pick(rng, AD_TEXT)
        edit = ("ad", f"creative={creative}", field_name, old, new)
    return Edit(day, hour, campaign, *edit, harmless=True)


# -- the background ---------------------------------------------------------------------------


def sample_background(
    panel: Panel,
    config: AdsConfig,
    rng: np.random.Generator,
    prior: BackgroundPrior | None = None,
    points: Mapping[str, InterventionPoint] | None = None,
    draws: Sequence[InterventionDraw] = (),
) -> Background:
    """The account's state, background processes, twins of the causes and decoy edits for one
    episode (both worlds).

    The change history always holds ``total_edits`` rows: the cause's own edits (if any, at
    most one per campaign), the edits the processes, twins and effectful decoys logged inside
    the history window, and as many harmless edits as fill the rest; its size therefore does
    not depend on the cause. ``points`` are the SCM's intervention points, whose priors the
    twins draw from (none without them); ``draws`` are the episode's causes, of which the
    twins read only where they act (:func:`~causaltrace_domains.ads.twins.incident_campaigns`).
    Every draw comes from ``rng``.
    """
    prior = background_prior(config) if prior is None else prior
    acc, cal = Account.of(panel, config), Calendar.of(panel, config)
    state = sample_state(panel, config, rng, prior.state)
    kinds = eligible_kinds(prior, acc)
    names = tuple(kinds)
    weights = np.array([kinds[k] for k in names], dtype=np.float64)
    counts = np.asarray(prior.count_weights, dtype=np.float64)
    n = min(1 + int(rng.choice(len(counts), p=counts / counts.sum())), len(names))
    chosen = [
        names[i] for i in rng.choice(len(names), size=n, replace=False, p=weights / weights.sum())
    ]
    in_alert = bool(rng.random() < prior.alert_probability)
    alert_w = np.array([getattr(prior, k).alert_weight for k in chosen], dtype=np.float64)
    alert_index = (
        int(rng.choice(n, p=alert_w / alert_w.sum())) if in_alert and alert_w.sum() > 0 else -1
    )
    tag_cap = 1.0 / max(config.base_tag_fire_rate, config.safari_tag_fire_rate, 1e-9)
    processes = []
    for i, kind in enumerate(chosen):
        args = (getattr(prior, kind), acc, cal, rng, i == alert_index)
        if kind == "enhanced_conversions":
            process = _enhanced_conversions(*args, cap=tag_cap)
        else:
            process = SAMPLERS[kind](*args)
        processes.append(_in_history(process, cal))
    twins = ()
    if points:
        incident = incident_campaigns(panel, draws)
        context = TwinContext(panel, config, state, points, incident)
        twins = tuple(_in_history(t, cal) for t in sample_twins(context, prior.twins, rng))
        for twin in twins:  # the room a twin budget cut needs is the account's from day 0
            state = state.with_headroom(twin.details.get("headroom", {}))
    timing = timing_of(config, panel)  # edit_timing="hour": decoy edits act from their hour
    decoys = [
        _in_history(_effectful_decoy(prior.decoys, acc, cal, state, rng, timing), cal)
        for _ in range(_integer(rng, prior.decoys.effectful))
    ]
    logged = tuple(e for p in (*processes, *twins, *decoys) for e in p.edits)
    lo, hi = config.decoy_edits
    room = int(rng.integers(lo, hi + 1)) + len(acc.campaigns)  # harmless edits + a cause's
    harmless = tuple(_harmless_edit(prior.decoys, acc, cal, rng) for _ in range(room))
    total = room + len(logged)
    users = tuple(_pick(rng, USERS) for _ in range(total))
    interventions = (
        *state.interventions(panel),
        *(iv for p in (*processes, *twins, *decoys) for iv in p.interventions),
    )
    return Background(
        interventions,
        changes=background_changes(panel, (*processes, *twins, *decoys)),
        notes={
            "total_edits": total,
            "effectful": logged,
            "effect_free": harmless,
            "users": users,
            "processes": tuple(processes),
            "twins": twins,
            "decoys": tuple(decoys),
            "state": state,
            "touches_alert_window": any(p.touches_alert_window(cal) for p in processes),
            "prior": prior,
        },
    )


def background_changes(panel: Panel, processes: Sequence[Process]) -> tuple[BackgroundChange, ...]:
    """Each process, twin and decoy as one change the label's attribution switches on and off
    (a twin budget cut and the learning period it starts are one change: they happen
    together); named by kind and order (``twin:BUDGET_CAP#1``), described by its first logged
    edit as the change history shows it (or by its kind and onset where it logged none)."""
    seen: dict[str, int] = {}
    out = []
    for process in processes:
        seen[process.kind] = seen.get(process.kind, 0) + 1
        out.append(
            BackgroundChange(
                f"{process.kind}#{seen[process.kind]}",
                process.kind,
                process.interventions,
                _describe(panel, process),
                nameable=process.kind not in UNNAMEABLE,
            )
        )
    return tuple(out)


def _describe(panel: Panel, process: Process) -> str:
    if process.edits:
        e = process.edits[0]
        where = e.campaign or ACCOUNT
        more = f" (+{len(process.edits) - 1} more edits)" if len(process.edits) > 1 else ""
        return (
            f"{_date(panel, e.day)} {e.hour:02d}h {where} {e.field}: "
            f"{e.old_value or '-'} -> {e.new_value or '-'}{more}"
        )
    onsets = [iv.window.onset for iv in process.interventions]
    return f"{process.kind} from {_date(panel, min(onsets))}" if onsets else process.kind


def _in_history(process: Process, cal: Calendar) -> Process:
    """The process with only the edits the 30-day change history still keeps."""
    kept = tuple(e for e in process.edits if cal.first_logged <= e.day < cal.n_time)
    return replace(process, edits=kept) if kept != process.edits else process


SAMPLERS = {
    "promotion": _promotion,
    "learning_period": _learning_period,
    "auction_volatility": _auction_volatility,
    "campaign_pause": _campaign_pause,
    "pmax_cannibalisation": _pmax_cannibalisation,
    "consent_change": _consent_change,
}
