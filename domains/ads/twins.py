"""Twins of the change-type causes: the same edit, in the background, that did not move the alert.

An account's change history is full of edits that look like a root cause and are not one. For
each cause that is an account edit (BUDGET_CAP, BID_MODIFIER_CHANGE, TARGETING_EXPANSION) and
for AD_DISAPPROVAL, the background may carry twins: a draw from *the cause's own prior* (the same
edit size, slice, breadth and onset window, written in the same form through
:func:`causaltrace_domains.ads.edits.draw_edits`), applied to both worlds, and placed where the
account's state (:mod:`causaltrace_domains.ads.account_state`) keeps it from moving the alert,
for a reason only the metrics show:

- a budget cut on campaigns that never spent near their budget (its new budget still above what
  they spend: pacing does not change), as deep and as broad as the causes' cuts that are
  *accepted*; the account's state is drawn with the room for it (see :func:`_budget_twin`);
- a bid adjustment drawn as the cause's own, often on a campaign where the incident is (edits
  cluster on the campaign in trouble; whether it moves the alert is the account's: a segment
  with little volume, a KPI the raise does not hurt, smart-bidding campaigns that ignore it);
  with ``TwinPrior.quiet_share`` one that reaches the incident is put on a segment of the
  incident's campaign that is small *in this account* (:func:`_quiet`), so that a raise as
  large as an accepted cause's sits on the alerted campaign and only the segment's rows show
  that it could not have moved the alert;
- a widened targeting that finds little new eligible traffic (eligibility up by under 8%);
- a disapproved ad that served little of its ad group's rotation (its siblings absorb it), or
  one disapproved long before the reports start (it has no rows to lose).

Whatever moves a twin does make are background: the label never names it, and an episode whose
twin would explain the alert is rejected by the verifier's oracle gate, so the only way to
tell a twin from the cause is to weigh what the data did after the edit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from causaltrace import InterventionDraw, InterventionPoint, Panel, Scale, Slice, Window
from causaltrace_domains.ads import segments as seg
from causaltrace_domains.ads.account_state import AccountState
from causaltrace_domains.ads.causes import budget_interventions, timing_of
from causaltrace_domains.ads.config import AdsConfig, CampaignSpec
from causaltrace_domains.ads.edits import draw_edits, touched_campaigns
from causaltrace_domains.ads.records import Process
from causaltrace_domains.ads.twin_attributes import EditAttributes, load_table, strength_at

TWIN_CAUSES = ("BUDGET_CAP", "BID_MODIFIER_CHANGE", "TARGETING_EXPANSION", "AD_DISAPPROVAL")


@dataclass(frozen=True)
class TwinPrior:
    """How many twins an episode has and of which causes.

    ``unbinding_margin``: a twin budget cut leaves each campaign's unthrottled spend (budget
    x ``config.unthrottled_spend``) at least this multiple of its typical spend (1.35: above a
    holiday week's +30% demand and a day's noise). ``budget_cut_quantiles``: the quantiles of the cause's
    strength prior a twin cut is drawn from (the verifier keeps a BUDGET_CAP only where its cut
    binds, so accepted cuts sit in the prior's upper part: on ads_test accepted strengths run
    0.51-0.75 (p10-p90) of the prior's 0.15-0.8, quantiles 0.55-0.92; twins drawn from the whole
    prior cut to a median 0.71 of the old budget against 0.49 for the causes).
    ``bid_quantiles``: the same for a twin bid raise (accepted raises sit at quantiles
    0.29-0.83). ``headroom_spread``: how far above the least room that keeps a twin cut
    unbinding the account's budget sits (a log-uniform factor up to this). ``near_incident``:
    the probability that a bid twin is written on a campaign where the episode's causes act
    (a cause's edit is always there, so an edit only ever far from the alert was a twin).
    ``incident_tries``: draws from the cause's prior before that placement is given up.
    ``onset_quantiles``: the part of the cause's onset range a twin edit is made in (the page
    compares the last week with the four before, so the verifier keeps causes whose edit is
    recent: on ads_test the causes' edits were a median 4.5 days before the data's end (p10-p90
    2.3-7.7), twins drawn over the whole range 8-9 days, and "a large edit in the last week"
    named the cause).
    ``targeting_gain``: the range of a twin widening's eligibility gain.
    ``stale_disapproval``: the probability that a twin disapproval predates the reports."""

    count_weights: tuple[float, ...] = (0.2, 0.4, 0.3, 0.1)  # 0, 1, 2 or 3 twins
    # Bid twins twice as often as the others: a raise near the incident often moves the page
    # and its episode is rejected, so at weight 1 only 13% of accepted episodes of other
    # causes kept a large raise against 100% of BID_MODIFIER_CHANGE's.
    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "BUDGET_CAP": 1.5,
            "BID_MODIFIER_CHANGE": 2.0,
            "TARGETING_EXPANSION": 1.0,
            "AD_DISAPPROVAL": 1.0,
        }
    )
    unbinding_margin: float = 1.35
    budget_cut_quantiles: tuple[float, float] = (0.55, 1.0)
    bid_quantiles: tuple[float, float] = (0.3, 1.0)
    headroom_spread: float = 1.4
    onset_quantiles: tuple[float, float] = (0.5, 1.0)
    near_incident: float = 0.6
    incident_tries: int = 8
    targeting_gain: tuple[float, float] = (0.0, 0.08)
    stale_disapproval: float = 0.5
    # A recent twin disapproval hits an ad with at most this share of its ad group's rotation
    # (its group then wins at least (1 - share) ** 0.6 of what it did: 84% at 0.25; the least
    # served ad of a campaign carries <= 0.15 in 2% of accounts, <= 0.25 in 18%); where no
    # ad of the campaign carries so little, the twin is a stale one.
    little_served: float = 0.25
    # With a table of accepted attributes (AdsConfig.twin_attributes): draws of the cause's
    # prior tried for one that matches a measured row (its target, reach and, for a bid twin
    # that should be near the incident, a campaign of it) before the closest is taken.
    match_tries: int = 24
    # Where a bid twin reaches a campaign of the incident: None keeps the draw's slice; a share
    # re-places it (:func:`_quiet`) on a segment of a manual-CPC incident campaign that carries
    # at most this share of the campaign's expected cost in this account, so that a raise as
    # large as an accepted cause's sits on the alerted campaign and does little, for a reason
    # only the metrics show (the segment's size in this account).
    quiet_share: float | None = None
    # With ``quiet_share``: the probability that an episode whose causes act on a campaign
    # that takes bid adjustments gets one more bid twin there, on a quiet segment (dropped
    # where the account has none). The regular twins reach the incident in too few episodes:
    # on a fresh split only 1 of 46 cost alerts of other causes showed a bid row on the
    # alerted campaign, against 13 of 13 of BID_MODIFIER_CHANGE's.
    quiet_extra: float = 0.0
    # With ``quiet_share``: also re-place a bid twin that reaches no campaign of the incident
    # on a quiet segment of the campaigns it reaches, and give ``quiet_extra``'s twin a quiet
    # segment of any campaign that takes bid adjustments where the incident has none (a
    # NO_ANOMALY episode, causes on smart-bidding campaigns). Without it, twins away from the
    # incident survive the gate only when small, and the size of a raise on a busy campaign
    # named BID_MODIFIER_CHANGE (a dry run of ads_test: 34 of 38; with it alone 41 of 47, with
    # ``quiet_only`` too 38 of 43, no longer by size: docs/audit.md section 8).
    quiet_anywhere: bool = False
    # With ``quiet_share``: a bid twin that finds no quiet segment is not drawn at all. Loud
    # twins are what the change-share gate rejects, so the raises that survived were the
    # smaller ones and a large raise named the cause; without loud twins nothing is selected
    # after the draw, and the surviving raises are the table's.
    quiet_only: bool = False
    # With ``quiet_share``: a quiet segment qualifies only if in a *typical* account (the mix
    # at its typical value) it carries at least this share of its campaign's expected cost, so
    # that the twin sits on a segment whose name says "busy" (where accepted causes sit) and
    # only this account's rows show it is quiet. Without it the quiet segment was nearly always
    # the tablet (0.15 of mobile's typical volume), which no accepted cause targets: on a dry
    # run of ads_test 9 of the 11 large raises on the alerted campaign in other causes' cost
    # alerts were on the tablet (docs/audit.md section 8).
    quiet_typical: float = 0.0


@dataclass(frozen=True)
class TwinContext:
    """What a twin sampler reads: the panel, the campaigns, the account's state, the causes'
    intervention points (their priors) and the campaigns where the episode's causes act
    (:func:`incident_campaigns`; where, never which cause)."""

    panel: Panel
    config: AdsConfig
    state: AccountState
    points: Mapping[str, InterventionPoint]
    incident: tuple[str, ...] = ()
    cut: frozenset[str] = frozenset()  # campaigns an earlier twin's budget cut reached

    @property
    def specs(self) -> dict[str, CampaignSpec]:
        return {c.name: c for c in self.config.campaigns}


def incident_campaigns(panel: Panel, draws: Sequence[InterventionDraw]) -> tuple[str, ...]:
    """The campaigns where ``draws`` act, in the panel's order: a budget edit's own campaigns,
    else those with a cell in the draw's slice (every campaign for an account-wide draw)."""
    levels = panel.dimension("campaign").levels
    reached: set[str] = set()
    for draw in draws:
        named = draw.extras.get("campaigns")
        if named:
            reached.update(named)
        elif draw.slice is None:
            reached.update(levels)
        else:
            reached.update(touched_campaigns(panel, draw.slice))
    return tuple(c for c in levels if c in reached)


def _recent(ctx: TwinContext, prior: TwinPrior, draw: InterventionDraw, rng) -> InterventionDraw:
    """``draw`` with its onset redrawn from the later part of its prior's onset range."""
    point = ctx.points[draw.point]
    first, last = point.prior.onset_range(ctx.panel.n_time)
    q0, q1 = prior.onset_quantiles
    lo = first + int(np.ceil(q0 * (last - first)))
    hi = first + int(np.floor(q1 * (last - first)))
    onset = int(rng.integers(lo, max(hi, lo) + 1))
    return replace(draw, window=replace(draw.window, onset=onset))


def _measured(
    ctx: TwinContext, prior: TwinPrior, cause: str, rng: np.random.Generator
) -> InterventionDraw | None:
    """A twin's draw like one measured accepted edit of ``cause`` (:func:`_like`), near the
    incident with probability ``near_incident`` (a cause's edit is always there); None without
    a table (``AdsConfig.twin_attributes``) or where the table has no row of ``cause``."""
    name = ctx.config.twin_attributes
    row = None if name is None else load_table(name).draw(cause, rng)
    if row is None:
        return None
    near = bool(ctx.incident) and rng.random() < prior.near_incident
    return _like(ctx, ctx.points[cause], row, rng, prior.match_tries, near)


def _like(
    ctx: TwinContext,
    point: InterventionPoint,
    row: EditAttributes,
    rng: np.random.Generator,
    tries: int,
    near: bool,
) -> InterventionDraw:
    """A draw of ``point``'s prior like the accepted edit ``row``: the first of ``tries`` draws
    whose slice targets ``row``'s dimensions, reaches as many campaigns and (``near``) a
    campaign of the incident, else the closest in that order; its size and day are ``row``'s
    (the day clipped to the prior's onset range)."""
    best, best_key = None, None
    for _ in range(max(int(tries), 1)):
        draw = point.sample(rng, ctx.panel)
        reach = touched_campaigns(ctx.panel, draw.slice)
        key = (
            tuple(sorted(draw.slice.dims)) != row.dims,
            near and not set(reach) & set(ctx.incident),
            abs(len(reach) - row.reach),
        )
        if best_key is None or key < best_key:
            best, best_key = draw, key
        if key == (False, False, 0):
            break
    n = ctx.panel.n_time
    first, last = point.prior.onset_range(n)
    onset = min(max(n - 1 - row.days_before_end, first), last)
    return replace(
        best,
        strength=strength_at(point.prior, row.strength_quantile),
        window=replace(best.window, onset=onset),
    )


def expected_cost_weight(panel: Panel, state: AccountState | None) -> np.ndarray:
    """Each cell's expected cost in this account up to a factor per campaign: the segment's
    typical volume and CPC (:mod:`~causaltrace_domains.ads.segments`) times the account's mix
    (its state's volume; a typical account's with ``state`` None); the episode's noise is not
    drawn yet, so it is left out."""
    shape = seg.multiplier(panel, seg.VOLUME) * seg.multiplier(panel, seg.CPC)
    return (shape if state is None else shape * state.volume)[:, 0]


def quiet_segments(
    ctx: TwinContext,
    point: InterventionPoint,
    dim: str,
    share: float,
    campaigns: Sequence[str] | None = None,
    typical: float = 0.0,
) -> list[tuple[str, str]]:
    """The (campaign, level) pairs of ``dim`` on a campaign of ``campaigns`` (the incident's by
    default) that takes ``point``'s adjustments whose expected cost
    (:func:`expected_cost_weight`) is at most ``share`` of the campaign's, in the panel's
    order; with ``typical``, only levels that carry at least that share in a typical account
    (``TwinPrior.quiet_typical``)."""
    campaigns = ctx.incident if campaigns is None else campaigns
    allowed = dict(point.prior.allowed_levels or {})
    takes = set(allowed.get("campaign", campaigns))
    campaign, level = ctx.panel.labels("campaign"), ctx.panel.labels(dim)
    weight = expected_cost_weight(ctx.panel, ctx.state)
    usual = expected_cost_weight(ctx.panel, None) if typical > 0 else None
    out = []
    for c in campaigns:
        if c not in takes:
            continue
        mine = campaign == c
        total = weight[mine].sum()
        for value in allowed.get(dim, ctx.panel.dimension(dim).levels):
            cells = mine & (level == value)
            if not cells.any() or weight[cells].sum() > share * total:
                continue
            if usual is not None and usual[cells].sum() < typical * usual[mine].sum():
                continue
            out.append((c, value))
    return out


def _quiet(
    ctx: TwinContext,
    point: InterventionPoint,
    draw: InterventionDraw,
    share: float,
    rng,
    anywhere: bool = False,
    typical: float = 0.0,
) -> InterventionDraw:
    """``draw`` re-placed, when it reaches a campaign of the incident, on one of the
    :func:`quiet_segments` of its segment's dimension there (uniformly; as it was when there is
    none); with ``anywhere``, a draw that reaches none is re-placed on a quiet segment of the
    campaigns it reaches. Its size, day and dimension stay the accepted cause's; what changes
    is that the segment is small *in this account*, which the segment's own rows show and its
    name does not (with the account's mix spread as wide as accounts differ,
    ``background.state.mix_sd``)."""
    reached = touched_campaigns(ctx.panel, draw.slice)
    if set(reached) & set(ctx.incident):
        campaigns = ctx.incident
    elif anywhere:
        campaigns = tuple(reached)
    else:
        return draw
    dims = [d for d in draw.slice.dims if d != "campaign"]
    if len(dims) != 1:
        return draw
    if "campaign" not in draw.slice.dims:
        return _quiet_broad(ctx, point, draw, dims[0], share, reached, rng, typical)
    options = quiet_segments(ctx, point, dims[0], share, campaigns, typical)
    if not options:
        return draw
    campaign, level = options[int(rng.integers(len(options)))]
    return replace(draw, slice=Slice((("campaign", campaign), (dims[0], level))))


def _quiet_broad(
    ctx: TwinContext,
    point: InterventionPoint,
    draw: InterventionDraw,
    dim: str,
    share: float,
    reached: Sequence[str],
    rng,
    typical: float = 0.0,
) -> InterventionDraw:
    """A broad draw (one level of ``dim`` on every campaign that takes bid adjustments, one edit
    row per campaign within the hour, as most accepted bid causes are: 14 of 21 on a dry run of
    ``ads_test``) re-placed on a level whose expected cost is at most ``share`` of its
    campaign's in *every* campaign it edits, so that it keeps its breadth; as it was where no
    level is. Re-placing it on one campaign made the breadth of a large raise name the cause."""
    edited = [c for c in reached if ctx.specs[c].applies_bid_adjustments]
    if not edited:
        return draw
    quiet_in: dict[str, set[str]] = {}
    for campaign, level in quiet_segments(ctx, point, dim, share, edited, typical):
        quiet_in.setdefault(level, set()).add(campaign)
    levels = [level for level, where in quiet_in.items() if where == set(edited)]
    if not levels:
        return draw
    return replace(draw, slice=Slice(((dim, levels[int(rng.integers(len(levels)))]),)))


def _hour(rng: np.random.Generator) -> int:
    return int(rng.integers(7, 20))  # as a cause's own edit


def _budget_twin(ctx: TwinContext, prior: TwinPrior, rng: np.random.Generator) -> Process | None:
    """A cut that mirrors an accepted cause's: its depth from the upper part of the cause's
    strength prior, its breadth the larger of two of the prior's draws (accepted cuts reach
    more campaigns than the prior's), on campaigns whose budget leaves the room to absorb it.

    Where the account's drawn state has not that room, the twin's campaigns are given it
    (``details["headroom"]``: the background raises the state before anything reads it), so
    that the twin is as deep and as broad as the cause and only spend against budget tells
    them apart. Placing twins only on campaigns that happened to have the room kept them
    shallower (no cut below 0.35 of the old budget) and narrower (never every campaign):
    the audit's rule probe named BUDGET_CAP from the edit's size (precision 1.00)."""
    point = ctx.points["BUDGET_CAP"]
    low, high = point.prior.strength
    q0, q1 = prior.budget_cut_quantiles
    draw = point.sample(rng, ctx.panel)
    other = point.sample(rng, ctx.panel)
    if len(other.extras["campaigns"]) > len(draw.extras["campaigns"]):
        draw = replace(draw, extras=other.extras)
    strength = low + (q0 + (q1 - q0) * float(rng.random())) * (high - low)
    factor = 1.0 - strength
    # One twin cut per campaign: a second would compound with the first and might bind.
    campaigns = [c for c in draw.extras["campaigns"] if c not in ctx.cut]
    if not campaigns:
        return None
    least = prior.unbinding_margin / (factor * ctx.config.unthrottled_spend)
    spread = np.exp(rng.uniform(0.0, np.log(prior.headroom_spread), size=len(campaigns)))
    headroom = {c: float(max(ctx.state.headroom[c], least * f)) for c, f in zip(campaigns, spread)}
    draw = _recent(ctx, prior, replace(draw, strength=strength), rng)
    hour = _hour(rng)
    edits = draw_edits("budget", draw, ctx.panel, ctx.specs, hour, campaigns=campaigns)
    timing = timing_of(ctx.config, ctx.panel)  # edit_timing="hour": it acts from its hour
    interventions = budget_interventions(campaigns, factor, draw.window, ctx.specs, timing, hour)
    details = {
        "campaigns": tuple(campaigns),
        "factor": factor,
        "onset": draw.window.onset,
        "headroom": headroom,
    }
    return Process("twin:BUDGET_CAP", tuple(interventions), tuple(edits), details)


def _broader(ctx: TwinContext, point: InterventionPoint, rng) -> InterventionDraw:
    """The broader of two draws from ``point``'s prior (the one whose slice reaches more
    campaigns): the verifier keeps the causes whose edit moved the page, which are the broad
    ones (on ads_test 67% of accepted bid raises were written on every campaign serving a
    segment, against 39% of twins drawn once from the prior)."""
    first, second = point.sample(rng, ctx.panel), point.sample(rng, ctx.panel)
    reach = [len(touched_campaigns(ctx.panel, d.slice)) for d in (first, second)]
    return second if reach[1] > reach[0] else first


def _near_incident(ctx: TwinContext, point: InterventionPoint, rng, tries: int):
    """A draw (:func:`_broader`) whose slice reaches a campaign of the incident (None when
    ``tries`` draws do not: e.g. the incident is on campaigns the edit cannot take)."""
    for _ in range(max(int(tries), 1)):
        draw = _broader(ctx, point, rng)
        if set(touched_campaigns(ctx.panel, draw.slice)) & set(ctx.incident):
            return draw
    return None


def _bid_twin(ctx: TwinContext, prior: TwinPrior, rng: np.random.Generator) -> Process | None:
    """A draw from the cause's prior, its raise from the upper part of the prior's range as the
    accepted causes' are (the verifier keeps a raise that explains the page: accepted raises
    on ads_test were +115% to +179% (p10-p90) of the prior's +80% to +200%; a twin drawn from
    the whole range was smaller, and the raise's size named the cause). With probability
    ``near_incident`` it is written on a campaign where the episode's causes act: a cause's
    edit always names the alerted campaign, and twins placed anywhere named it in 7% of the
    other episodes, so "a large raise on the alerted campaign" named the cause (precision
    0.90). Its slice is the broader of two draws, as accepted raises are. No preference for
    small segments: that would make the edited segment's name tell
    the twin from the cause. Whether it moves the alert is the account's and the episode's: a
    segment with little volume, a KPI the raise does not hurt, a smart-bidding campaign that
    ignores it; an episode where it does account for an alert is rejected by the oracle gate."""
    point = ctx.points["BID_MODIFIER_CHANGE"]
    draw = _measured(ctx, prior, "BID_MODIFIER_CHANGE", rng)
    if draw is None:
        if ctx.incident and rng.random() < prior.near_incident:
            draw = _near_incident(ctx, point, rng, prior.incident_tries)
        if draw is None:
            draw = _broader(ctx, point, rng)
        low, high = point.prior.strength
        q0, q1 = prior.bid_quantiles
        draw = replace(draw, strength=low + (q0 + (q1 - q0) * float(rng.random())) * (high - low))
        draw = _recent(ctx, prior, draw, rng)
    quiet = None
    if prior.quiet_share is not None:
        placed = _quiet(
            ctx, point, draw, prior.quiet_share, rng, prior.quiet_anywhere, prior.quiet_typical
        )
        quiet, draw = placed is not draw, placed
        if prior.quiet_only and not quiet:
            return None
    hour = _hour(rng)
    edits = draw_edits("bid_modifier", draw, ctx.panel, ctx.specs, hour)
    if not edits:
        return None
    if timing_of(ctx.config, ctx.panel) is not None:  # the point's builder reads the hour
        draw = replace(draw, extras={**draw.extras, "hour": hour})
    interventions = tuple(point.interventions(draw))
    details = {
        "slice": draw.slice.canonical(),
        "strength": draw.strength,
        "onset": draw.window.onset,
    }
    if quiet is not None:
        details["quiet"] = quiet
    return Process("twin:BID_MODIFIER_CHANGE", interventions, tuple(edits), details)


def _targeting_twin(ctx: TwinContext, prior: TwinPrior, rng: np.random.Generator) -> Process | None:
    """A widening of the cause's own form (its target, reach and day as the accepted causes'
    where a table is given) that finds little new eligible traffic: the change history shows
    the edit, the metrics show it did little."""
    draw = _measured(ctx, prior, "TARGETING_EXPANSION", rng)
    if draw is None:
        point = ctx.points["TARGETING_EXPANSION"]
        draw = _recent(ctx, prior, point.sample(rng, ctx.panel), rng)
    gain = float(rng.uniform(*prior.targeting_gain))
    hour = _hour(rng)
    edits = draw_edits("targeting", draw, ctx.panel, ctx.specs, hour)
    timing = timing_of(ctx.config, ctx.panel)
    window = draw.window if timing is None else timing.window(draw.window, draw.slice, hour)
    iv = Scale("targeting_eligibility", where=draw.slice, window=window, factor=1.0 + gain)
    details = {
        "slice": draw.slice.canonical(),
        "gain": gain,
        "strength": draw.strength,
        "onset": draw.window.onset,
    }
    return Process("twin:TARGETING_EXPANSION", (iv,), tuple(edits), details)


def _disapproval_twin(
    ctx: TwinContext, prior: TwinPrior, rng: np.random.Generator
) -> Process | None:
    point = ctx.points["AD_DISAPPROVAL"]
    draw = point.sample(rng, ctx.panel)
    stale = bool(rng.random() < prior.stale_disapproval)
    creative = dict(draw.slice.conditions)["creative"]
    # The ad of its campaign that carries the least of the rotation: its siblings absorb it.
    campaign = touched_campaigns(ctx.panel, draw.slice)[0]
    labels = ctx.panel.labels("creative")
    own = np.unique(labels[ctx.panel.labels("campaign") == campaign])
    least = min(own, key=lambda c: ctx.state.rotation_share(ctx.panel, c))
    stale = stale or ctx.state.rotation_share(ctx.panel, least) > prior.little_served
    if not stale:
        creative = least
        conditions = tuple(
            (d, creative if d == "creative" else v) for d, v in draw.slice.conditions
        )
        draw = replace(draw, slice=replace(draw.slice, conditions=conditions))
    window = Window(0) if stale else draw.window
    iv = Scale("creative_approval", where=draw.slice, window=window, factor=0.0)
    details = {"slice": draw.slice.canonical(), "stale": stale, "onset": window.onset}
    return Process("twin:AD_DISAPPROVAL", (iv,), (), details)


SAMPLERS = {
    "BUDGET_CAP": _budget_twin,
    "BID_MODIFIER_CHANGE": _bid_twin,
    "TARGETING_EXPANSION": _targeting_twin,
    "AD_DISAPPROVAL": _disapproval_twin,
}


def sample_twins(
    ctx: TwinContext, prior: TwinPrior, rng: np.random.Generator
) -> tuple[Process, ...]:
    """The episode's twins (every draw from ``rng``). A cause the account cannot have (its
    point is missing) or a draw that cannot be placed as a twin is skipped."""
    causes = [c for c in TWIN_CAUSES if c in ctx.points and prior.weights.get(c, 0) > 0]
    if not causes:
        return ()
    counts = np.asarray(prior.count_weights, dtype=np.float64)
    n = int(rng.choice(len(counts), p=counts / counts.sum()))
    weights = np.array([prior.weights[c] for c in causes], dtype=np.float64)
    out = []
    for _ in range(n):
        cause = causes[int(rng.choice(len(causes), p=weights / weights.sum()))]
        twin = SAMPLERS[cause](ctx, prior, rng)
        if twin is None:
            continue
        out.append(twin)
        if "headroom" in twin.details:  # later twins see the room this one was given
            ctx = replace(
                ctx,
                state=ctx.state.with_headroom(twin.details["headroom"]),
                cut=ctx.cut | set(twin.details["campaigns"]),
            )
    extra = prior.quiet_share is not None and (ctx.incident or prior.quiet_anywhere)
    if extra and rng.random() < prior.quiet_extra:
        near = replace(prior, near_incident=1.0)
        twin = _bid_twin(ctx, near, rng) if ctx.incident else None
        if prior.quiet_anywhere and (twin is None or not twin.details["quiet"]):
            # no quiet segment on the incident: one on any campaign that takes bids
            every = replace(ctx, incident=tuple(ctx.panel.dimension("campaign").levels))
            twin = _bid_twin(every, near, rng)
        if twin is not None and twin.details["quiet"]:
            out.append(twin)
    return tuple(out)
