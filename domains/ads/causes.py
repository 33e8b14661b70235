"""The twelve root causes of the ads domain, as intervention points of its SCM.

Each cause names the mechanism it intervenes on, the prior over its slice, strength, onset and
profile, the channels its signal enters through, and the causes it is most easily confused with
(see docs/domain-ads.md for each cause's signature and how it is told apart).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from causaltrace import (
    CauseInfo,
    Decay,
    InterventionDraw,
    InterventionPoint,
    InterventionPrior,
    Panel,
    Ramp,
    Replace,
    Scale,
    Slice,
    Step,
    Window,
)
from causaltrace_domains.ads import mechanisms as m
from causaltrace_domains.ads import segments as seg
from causaltrace_domains.ads.config import (
    FREQUENCY_KINDS,
    FREQUENCY_PLACEMENTS,
    AdsConfig,
    CampaignSpec,
)

CAMPAIGN_WIDE = "campaign-wide"
SEGMENT_MIX = "segment-mix"
SEGMENT_SPECIFIC = "segment-specific"
NO_SIGNAL = "no-signal"
GROUPS = (CAMPAIGN_WIDE, SEGMENT_MIX, SEGMENT_SPECIFIC, NO_SIGNAL)


# What the domain declares about each cause besides its intervention (the engine's CauseInfo):
# its group, the causes it is most easily confused with, the channels its signal enters through
# and, in ``extra``, the change-history edit the account made (``account_change``), if any.
# typical_snr is the median detection SNR of the cause's accepted episodes under the default
# account and prior (the verifier's signature statistic on the visible tables): the unit of a
# difficulty tier's SNR band. Measured on a fresh split of the ads_test composition (235
# episodes, seed 424242; the campaign-wide COMPETITIVE_PRESSURE and DEMAND_SHIFT on 48 episodes
# of theirs after their effects became heterogeneous) with
# `python -m causaltrace.episodes.difficulty <dir>`; None for the no-signal cause.
CAUSES: dict[str, CauseInfo] = {
    "BUDGET_CAP": CauseInfo(
        CAMPAIGN_WIDE,
        confusers=("DEMAND_SHIFT", "COMPETITIVE_PRESSURE"),
        channels=("volume",),
        typical_snr=6.7,
        extra={"account_change": "budget"},
    ),
    "COMPETITIVE_PRESSURE": CauseInfo(
        CAMPAIGN_WIDE,
        confusers=("BUDGET_CAP", "DEMAND_SHIFT"),
        channels=("volume", "rate"),
        typical_snr=4.2,
    ),
    "DEMAND_SHIFT": CauseInfo(
        CAMPAIGN_WIDE,
        confusers=("BUDGET_CAP", "COMPETITIVE_PRESSURE"),
        channels=("volume",),
        typical_snr=2.2,
    ),
    "TARGETING_EXPANSION": CauseInfo(
        SEGMENT_MIX,
        confusers=("BID_MODIFIER_CHANGE", "PLACEMENT_SHIFT"),
        channels=("mix", "rate"),
        typical_snr=6.9,
        extra={"account_change": "targeting"},
    ),
    "PLACEMENT_SHIFT": CauseInfo(
        SEGMENT_MIX,
        confusers=("TARGETING_EXPANSION", "INVALID_TRAFFIC"),
        channels=("mix",),
        typical_snr=10.1,
    ),
    "BID_MODIFIER_CHANGE": CauseInfo(
        SEGMENT_MIX,
        confusers=("TARGETING_EXPANSION", "COMPETITIVE_PRESSURE"),
        channels=("mix", "rate"),
        typical_snr=4.4,
        extra={"account_change": "bid_modifier"},
    ),
    "CREATIVE_FATIGUE": CauseInfo(
        SEGMENT_SPECIFIC,
        confusers=("AD_DISAPPROVAL", "DEMAND_SHIFT"),
        channels=("rate",),
        typical_snr=14.3,
    ),
    "TRACKING_OUTAGE": CauseInfo(
        SEGMENT_SPECIFIC,
        confusers=("LANDING_PAGE_BREAK", "NO_ANOMALY"),
        channels=("rate",),
        typical_snr=17.5,
    ),
    "LANDING_PAGE_BREAK": CauseInfo(
        SEGMENT_SPECIFIC,
        confusers=("TRACKING_OUTAGE", "INVALID_TRAFFIC"),
        channels=("rate",),
        typical_snr=18.0,
    ),
    "INVALID_TRAFFIC": CauseInfo(
        SEGMENT_SPECIFIC,
        confusers=("LANDING_PAGE_BREAK", "PLACEMENT_SHIFT"),
        channels=("rate",),
        typical_snr=15.9,
    ),
    "AD_DISAPPROVAL": CauseInfo(
        SEGMENT_SPECIFIC,
        confusers=("CREATIVE_FATIGUE", "BUDGET_CAP"),
        channels=("mix", "volume"),
        typical_snr=298.6,
        extra={"account_change": "policy"},
    ),
    "NO_ANOMALY": CauseInfo(
        NO_SIGNAL, confusers=("TRACKING_OUTAGE", "DEMAND_SHIFT"), no_signal=True
    ),
}

# What the prompt says each cause is (in this order).
DESCRIPTIONS: dict[str, str] = {
    "BUDGET_CAP": (
        "daily budgets were cut below what campaigns spend; delivery is throttled to fit them and "
        "impressions are lost"
    ),
    "COMPETITIVE_PRESSURE": (
        "competitors bid up: CPCs rise and more impressions are lost on ad rank"
    ),
    "DEMAND_SHIFT": "fewer people search or browse: auctions fall while share and rates hold",
    "TARGETING_EXPANSION": (
        "targeting was widened to a low-intent segment, whose share of traffic grows"
    ),
    "PLACEMENT_SHIFT": "automatic placement moved volume to a cheap, low-converting placement",
    "BID_MODIFIER_CHANGE": (
        "a bid adjustment on a device, geo or audience changed that segment's share (manual CPC "
        "campaigns apply adjustments; smart bidding ignores them)"
    ),
    "CREATIVE_FATIGUE": "an ad wears out: its CTR decays as its audience sees it again and again",
    "TRACKING_OUTAGE": "the conversion tag stops firing for some users; real orders are unchanged",
    "LANDING_PAGE_BREAK": (
        "the landing page breaks for some users: real orders fall with conversions"
    ),
    "INVALID_TRAFFIC": "bots click the ads: CTR and invalid clicks rise, conversion rate falls",
    "AD_DISAPPROVAL": (
        "an ad is disapproved and stops serving; the other ads absorb part of its traffic"
    ),
    "NO_ANOMALY": (
        "no fault: the alert fired on noise, seasonality or a routine change (a promotion ending, "
        "a paused campaign, a bidding learning period)"
    ),
}


def account_change(cause: str) -> str | None:
    """The change-history edit the account made with ``cause`` (None: the cause is no edit)."""
    return CAUSES[cause].extra.get("account_change")


EDIT_HOURS = (7, 20)  # an edit's hour: integers(7, 20), working hours (as the change history)


def edit_hour(rng: np.random.Generator) -> int:
    """The hour of day an account edit is made."""
    return int(rng.integers(*EDIT_HOURS))


@dataclass(frozen=True, eq=False)
class EditTiming:
    """When in its day an account edit takes effect (``AdsConfig.edit_timing="hour"``).

    An edit acts from the hour of its change-history timestamp: its window starts ``hour / 24``
    into the edit day, and the day's weight is the share of the edited cells' traffic that
    falls after that hour, by the devices' hourly profiles that perf_hourly splits days with
    (each cell weighted by its typical volume). So the daily tables show the partial day and
    the hours before the edit are as they were (``render.perf_hourly``)."""

    panel: Panel
    volume: np.ndarray  # (n_cells,) each cell's typical auctions (relative)
    profiles: np.ndarray  # (n_cells, 24) the hourly shares of each cell's device

    @classmethod
    def of(cls, config: AdsConfig, panel: Panel) -> EditTiming:
        specs = {c.name: c.volume for c in config.campaigns}
        volume = seg.multiplier(panel, seg.VOLUME) * seg.by_campaign(panel, specs)
        volume = np.broadcast_to(volume, (panel.n_cells, 1))[:, 0]
        return cls(panel, volume, m.hour_profiles(panel.labels("device")))

    def share_after(self, where: Slice, hour: float) -> float:
        """The share of the traffic of the cells in ``where`` that falls after ``hour``."""
        mask = where.mask(self.panel)
        if not mask.any():
            return 1.0
        after = 1.0 - m.cumulative_share(self.profiles[mask], np.full(mask.sum(), float(hour)))
        weight = self.volume[mask]
        return float(np.clip((after * weight).sum() / weight.sum(), 0.0, 1.0))

    def window(self, window: Window, where: Slice, hour: int | None) -> Window:
        """``window`` starting at ``hour`` of its onset day (``window`` itself for no hour)."""
        if hour is None:
            return window
        return replace(window, start=hour / 24.0, onset_weight=self.share_after(where, hour))


def timing_of(config: AdsConfig, panel: Panel | None) -> EditTiming | None:
    """The account's edit timing when edits act from their hour, else None (from midnight)."""
    if config.edit_timing != "hour" or panel is None:
        return None
    return EditTiming.of(config, panel)


def _with_hour(extras):
    """A prior's ``extras`` plus the edit's hour, drawn from a child of the draw's stream (a
    spawned child: the parent's own draws, and so every other draw, stay as they were)."""

    def draw(rng: np.random.Generator, panel: Panel, where: Slice) -> dict:
        out = {} if extras is None else dict(extras(rng, panel, where))
        out["hour"] = edit_hour(rng.spawn(1)[0])
        return out

    return draw


ONE_D_AND_TWO_D = (1.0, 1.0)  # equal prior weight on 1D and 2D slices


def _scale(node: str, direction: float, timing: EditTiming | None = None):
    """Builder: scale ``node`` on the slice by 1 + direction x strength (an edit's: from the
    hour in the draw's extras, with ``timing``)."""

    def build(draw: InterventionDraw):
        window = draw.window
        if timing is not None:
            window = timing.window(window, draw.slice, draw.extras.get("hour"))
        return [
            Scale(node, where=draw.slice, window=window, factor=1.0 + direction * draw.strength)
        ]

    return build


# Smart bidding relearns after a large budget edit: CPC up, CVR down, fading over days.
LEARNING_EDIT = 0.3  # a budget change of at least this share starts a learning period
LEARNING_DAYS = 10
LEARNING_HALF_LIFE = 3.0


def budget_interventions(
    campaigns,
    factor: float,
    window: Window,
    specs: Mapping[str, CampaignSpec],
    timing: EditTiming | None = None,
    hour: int | None = None,
) -> list[Scale]:
    """A budget edit to ``factor`` x the budget on each of ``campaigns`` from ``window``'s
    onset, and the learning period it starts on smart-bidding campaigns when it is large (so a
    cut on a smart campaign also moves its CPC and CVR for a while, whether or not it binds).
    With ``timing`` and an ``hour``, each campaign's edit acts from that hour (its own traffic
    share after it weighs the edit day)."""
    out = []
    change = abs(1.0 - factor)
    for name in campaigns:
        where = Slice.of(campaign=name)
        own = window if timing is None else timing.window(window, where, hour)
        out.append(Scale("budget_change", where=where, window=own, factor=factor))
        if specs[name].smart_bidding and change >= LEARNING_EDIT:
            learning = Window(
                window.onset,
                window.onset + LEARNING_DAYS,
                Decay(LEARNING_HALF_LIFE),
                start=own.start,
                onset_weight=own.onset_weight,
            )
            out.append(Scale("expected_cpc", where=where, window=learning, factor=1 + 0.4 * change))
            out.append(Scale("cvr", where=where, window=learning, factor=1 - 0.2 * change))
    return out


def _budget_cut(specs: Mapping[str, CampaignSpec], timing: EditTiming | None = None):
    def build(draw: InterventionDraw):
        # A draw made by hand, without the prior's extras, cuts every campaign (account-wide).
        campaigns = draw.extras.get("campaigns") or tuple(specs)
        hour = draw.extras.get("hour")
        return budget_interventions(
            campaigns, 1.0 - draw.strength, draw.window, specs, timing, hour
        )

    return build


def budget_campaigns(rng: np.random.Generator, panel: Panel, where: Slice) -> dict:
    """Which campaigns a budget edit reaches: one to all of them, as edits are made (a single
    campaign's budget, or a cut across the account)."""
    names = list(panel.dimension("campaign").levels)
    k = int(rng.integers(1, len(names) + 1))
    chosen = sorted(int(i) for i in rng.choice(len(names), size=k, replace=False))
    return {"campaigns": [names[i] for i in chosen]}


FREQUENCY_BUILD_DAYS = 7  # fatigue="frequency": the audience saturates over a week


def _fatigue(
    healthy: m.ClickThroughRate, config: AdsConfig | None = None, panel: Panel | None = None
):
    """CREATIVE_FATIGUE's builder.

    ``fatigue="cumulative"`` (the committed splits): CTR decays with the impressions served
    since onset, on any creative. ``fatigue="frequency"``: fatigue is what the platforms
    describe, a frequency effect (display, video, social, remarketing; a search ad shown once
    per query does not wear out so), so the cause acts where frequency can build: on the
    display and video cells of the slice (the prior draws only creatives of display and
    Performance Max campaigns), the creative's fresh audience shrinks to 1 / (1 + strength)
    over ``FREQUENCY_BUILD_DAYS`` (frequency climbs over days), and CTR falls with the
    frequency's rise (:class:`~causaltrace_domains.ads.mechanisms.FrequencyFatiguedCtr`). Of
    the two rules the issue allows (decay driven by frequency, or fatigue only where frequency
    builds) this is both: decay without a frequency rise is what the analyst could not tell
    from a CTR drop on search, and a frequency rise on search has no inventory to come from."""
    if config is None or config.fatigue != "frequency" or panel is None:

        def build(draw: InterventionDraw):
            fatigued = m.FatiguedCtr(healthy, onset=draw.window.onset, decay=draw.strength)
            return [Replace("ctr", where=draw.slice, window=draw.window, mechanism=fatigued)]

        return build
    universe = seg.by_campaign(panel, {c.name: c.audience_universe for c in config.campaigns})
    inventory = np.isin(panel.labels("placement"), FREQUENCY_PLACEMENTS)[:, None]
    fatigued = m.FrequencyFatiguedCtr(healthy, np.broadcast_to(universe, (panel.n_cells, 1)))

    def build_frequency(draw: InterventionDraw):
        factor = np.where(inventory, 1.0 / (1.0 + draw.strength), 1.0)
        saturating = Window(draw.window.onset, profile=Ramp(FREQUENCY_BUILD_DAYS))
        return [
            Scale("audience_size", where=draw.slice, window=saturating, factor=factor),
            Replace(
                "ctr",
                where=draw.slice,
                window=draw.window,
                mechanism=fatigued,
                parents=("audience_size",),
            ),
        ]

    return build_frequency


def frequency_creatives(config: AdsConfig) -> tuple[str, ...]:
    """The creatives of campaigns where frequency can build (display, Performance Max)."""
    return tuple(
        creative for c in config.campaigns if c.kind in FREQUENCY_KINDS for creative in c.creatives
    )


def _nothing(draw: InterventionDraw):
    return []


def bid_adjustable_levels(config: AdsConfig) -> dict[str, tuple[str, ...]]:
    """The campaigns whose bids an adjustment changes (manual CPC) and, per dimension, the
    levels they serve (connected TVs take no device adjustment)."""
    manual = [c for c in config.campaigns if c.applies_bid_adjustments]
    levels = {
        "campaign": tuple(c.name for c in manual),
        "device": ("mobile", "desktop", "tablet"),
    }
    for dim in ("geo", "audience"):
        served = [level for c in manual for level in getattr(c, f"{dim}s")]
        levels[dim] = tuple(dict.fromkeys(served))
    return levels


def intervention_points(
    config: AdsConfig, healthy_ctr: m.ClickThroughRate, panel: Panel | None = None
) -> list[InterventionPoint]:
    """The 12 intervention points, with priors over slice, strength, onset and profile.

    ``panel`` (the SCM's) is needed by ``edit_timing="hour"`` (each edit's traffic share after
    its hour) and ``fatigue="frequency"``; without it both act as their defaults."""
    onset, geos = config.onset_window, config.geos
    specs = {c.name: c for c in config.campaigns}
    adjustable = bid_adjustable_levels(config)
    step_or_ramp = (Step(), Ramp(3))
    timing = timing_of(config, panel)
    # With edit timing, an edit's hour is part of its draw (drawn before the worlds are).
    timed = _with_hour if timing is not None else (lambda extras: extras)
    fatigue_creatives = (
        {"creative": frequency_creatives(config)}
        if config.fatigue == "frequency" and panel is not None
        else {}
    )
    priors: dict[str, tuple] = {
        "BUDGET_CAP": (
            # A cut of 15% can bind (a campaign already near its budget) and one of 80% may
            # not (a campaign that never spent near it): the edit's size does not decide.
            _budget_cut(specs, timing),
            InterventionPrior(strength=(0.15, 0.8), onset=onset, extras=timed(budget_campaigns)),
        ),
        "COMPETITIVE_PRESSURE": (
            _scale("competition_index", +1.0),
            InterventionPrior(strength=(0.3, 0.8), onset=onset, profiles=step_or_ramp),
        ),
        "DEMAND_SHIFT": (
            _scale("demand_index", -1.0),
            InterventionPrior(strength=(0.2, 0.45), onset=onset, profiles=step_or_ramp),
        ),
        "TARGETING_EXPANSION": (
            _scale("targeting_eligibility", +1.0, timing),
            InterventionPrior(
                slice_dims=(("audience",), ("geo",), ("audience", "geo")),
                slice_dim_weights=(0.35, 0.25, 0.4),
                # Any geo: "presence or interest" location options widen a large region as
                # much as a small one, and a small one rarely moves the account enough to alert.
                allowed_levels={
                    "audience": ("affinity", "custom_segment", "broad"),
                    "geo": geos,
                },
                strength=(1.5, 4.0),
                onset=onset,
                extras=timed(None),
            ),
        ),
        "PLACEMENT_SHIFT": (
            _scale("placement_weight", +1.0),
            InterventionPrior(
                slice_dims=(("placement",),),
                allowed_levels={"placement": ("search_partners", "display", "video")},
                strength=(2.0, 6.0),
                onset=onset,
                profiles=step_or_ramp,
            ),
        ),
        "BID_MODIFIER_CHANGE": (
            _scale("bid_modifier", +1.0, timing),
            InterventionPrior(
                # Adjustments are set per campaign: on one campaign's segment (2D, with the
                # campaign), or written on every campaign serving a segment (1D; it acts on the
                # manual-CPC ones).
                # (Each audience is served by one manual campaign only: no 1D audience slice.)
                slice_dims=(
                    ("device",),
                    ("geo",),
                    ("campaign", "device"),
                    ("campaign", "geo"),
                    ("campaign", "audience"),
                ),
                slice_dim_weights=(0.2, 0.15, 0.25, 0.2, 0.2),
                allowed_levels=adjustable,
                strength=(0.8, 2.0),
                onset=onset,
                extras=timed(None),
            ),
        ),
        "CREATIVE_FATIGUE": (
            _fatigue(healthy_ctr, config, panel),
            InterventionPrior(
                slice_dims=(("creative",), ("creative", "audience"), ("creative", "device")),
                slice_dim_weights=(0.5, 0.25, 0.25),
                allowed_levels={"device": ("mobile", "desktop"), **fatigue_creatives},
                strength=(1.0, 3.0),
                onset=onset,
            ),
        ),
        "TRACKING_OUTAGE": (
            _scale("tag_fire_rate", -1.0),
            InterventionPrior(
                slice_dims=(
                    ("browser_os",),
                    ("device",),
                    ("geo",),
                    ("browser_os", "geo"),
                    ("device", "geo"),
                ),
                slice_dim_weights=(0.25, 0.15, 0.15, 0.25, 0.2),
                allowed_levels={
                    "device": ("mobile", "desktop", "tablet"),
                    "browser_os": ("ios_safari", "android_chrome", "desktop_chrome", "mac_safari"),
                },
                strength=(0.5, 0.95),
                onset=onset,
                profiles=(Step(),),
            ),
        ),
        "LANDING_PAGE_BREAK": (
            _scale("cvr", -1.0),
            InterventionPrior(
                slice_dims=(
                    ("device",),
                    ("browser_os",),
                    ("geo",),
                    ("device", "geo"),
                    ("browser_os", "geo"),
                ),
                slice_dim_weights=(0.15, 0.25, 0.15, 0.2, 0.25),
                allowed_levels={
                    "device": ("mobile", "desktop", "tablet"),
                    "browser_os": ("ios_safari", "android_chrome", "desktop_chrome", "mac_safari"),
                },
                strength=(0.5, 0.9),
                onset=onset,
            ),
        ),
        "INVALID_TRAFFIC": (
            _scale("bot_rate", +1.0),
            InterventionPrior(
                slice_dims=(("placement",), ("geo",), ("placement", "geo")),
                slice_dim_weights=(0.35, 0.25, 0.4),
                allowed_levels={"placement": ("search_partners", "display")},
                strength=(5.0, 25.0),
                onset=onset,
                profiles=step_or_ramp,
            ),
        ),
        "AD_DISAPPROVAL": (
            _scale("creative_approval", -1.0),
            InterventionPrior(
                slice_dims=(("creative",), ("creative", "geo")),
                slice_dim_weights=(0.55, 0.45),
                onset=onset,
            ),
        ),
        "NO_ANOMALY": (_nothing, InterventionPrior(onset=onset)),
    }
    return [
        InterventionPoint(name, build, prior, DESCRIPTIONS[name], CAUSES[name])
        for name, (build, prior) in priors.items()
    ]
