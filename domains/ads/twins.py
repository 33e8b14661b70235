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
  *accepted* (see :func:`_budget_twin`);
- a bid adjustment drawn as the cause's own (whether it moves the alert is the account's: a
  segment with little volume, a KPI the raise does not hurt, smart-bidding campaigns that ignore
  it where a bulk edit is also written on them);
- a widened targeting that finds little new eligible traffic (eligibility up by under 8%);
- a disapproved ad that served little of its ad group's rotation (its siblings absorb it), or
  one disapproved long before the reports start (it has no rows to lose).

Whatever moves a twin does make are background: the label never names it, and an episode whose
twin would explain the alert is rejected by the verifier's oracle gate, so the only way to
tell a twin from the cause is to weigh what the data did after the edit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from causaltrace import InterventionPoint, Panel, Scale, Window
from causaltrace_domains.ads.account_state import AccountState
from causaltrace_domains.ads.causes import budget_interventions
from causaltrace_domains.ads.config import AdsConfig, CampaignSpec
from causaltrace_domains.ads.edits import draw_edits, touched_campaigns
from causaltrace_domains.ads.records import Process

TWIN_CAUSES = ("BUDGET_CAP", "BID_MODIFIER_CHANGE", "TARGETING_EXPANSION", "AD_DISAPPROVAL")


@dataclass(frozen=True)
class TwinPrior:
    """How many twins an episode has and of which causes.

    ``unbinding_margin``: a twin budget cut leaves each campaign's allowed spend (budget x
    overdelivery) at least this multiple of its typical spend (1.35: above a holiday week's
    +30% demand and a day's noise). ``budget_cut_quantiles``: the quantiles of the cause's
    strength prior a twin cut is drawn from (the verifier keeps a BUDGET_CAP only where its cut
    binds, so accepted cuts sit in the prior's upper part: on ads_test accepted strengths run
    0.51-0.75 (p10-p90) of the prior's 0.15-0.8, quantiles 0.55-0.92; twins drawn from the whole
    prior cut to a median 0.71 of the old budget against 0.49 for the causes; campaigns with the
    room for the deepest cuts are rare, so placed twins still run a little shallower).
    ``bid_quantiles``: the same for a twin bid raise (accepted raises sit at quantiles
    0.29-0.83). ``budget_tries``: draws before a budget twin is given up when no
    campaign has the room. ``targeting_gain``: the range of a twin widening's eligibility gain.
    ``stale_disapproval``: the probability that a twin disapproval predates the reports."""

    count_weights: tuple[float, ...] = (0.2, 0.4, 0.3, 0.1)  # 0, 1, 2 or 3 twins
    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "BUDGET_CAP": 1.5,
            "BID_MODIFIER_CHANGE": 1.0,
            "TARGETING_EXPANSION": 1.0,
            "AD_DISAPPROVAL": 1.0,
        }
    )
    unbinding_margin: float = 1.35
    budget_cut_quantiles: tuple[float, float] = (0.55, 1.0)
    bid_quantiles: tuple[float, float] = (0.3, 1.0)
    budget_tries: int = 8
    targeting_gain: tuple[float, float] = (0.0, 0.08)
    stale_disapproval: float = 0.5
    # A recent twin disapproval hits an ad with at most this share of its ad group's rotation
    # (its group then wins at least (1 - share) ** 0.6 of what it did: 84% at 0.25; the least
    # served ad of a campaign carries <= 0.15 in 2% of accounts, <= 0.25 in 18%); where no
    # ad of the campaign carries so little, the twin is a stale one.
    little_served: float = 0.25


@dataclass(frozen=True)
class TwinContext:
    """What a twin sampler reads: the panel, the campaigns, the account's state and the
    causes' intervention points (their priors)."""

    panel: Panel
    config: AdsConfig
    state: AccountState
    points: Mapping[str, InterventionPoint]

    @property
    def specs(self) -> dict[str, CampaignSpec]:
        return {c.name: c for c in self.config.campaigns}


def _hour(rng: np.random.Generator) -> int:
    return int(rng.integers(7, 20))  # as a cause's own edit


def _budget_twin(ctx: TwinContext, prior: TwinPrior, rng: np.random.Generator) -> Process | None:
    """A cut that mirrors an accepted cause's: its depth from the upper part of the cause's
    strength prior, its breadth the cause's own draw (one campaign to all), placed on campaigns
    with the room to absorb it. Twins drawn from the whole prior were shallower and narrower
    than the causes the verifier keeps, so "a deep cut on several campaigns" named the cause
    without a look at spend (the audit's rule probe, 0.92 precision on ads_test)."""
    point = ctx.points["BUDGET_CAP"]
    low, high = point.prior.strength
    q0, q1 = prior.budget_cut_quantiles
    overdelivery = ctx.config.overdelivery
    for _ in range(max(int(prior.budget_tries), 1)):
        draw = point.sample(rng, ctx.panel)
        strength = low + (q0 + (q1 - q0) * float(rng.random())) * (high - low)
        factor = 1.0 - strength
        slack = [
            c
            for c in ctx.specs
            if ctx.state.headroom[c] * factor * overdelivery >= prior.unbinding_margin
        ]
        if not slack:  # this cut would bind on every campaign: draw another
            continue
        wanted = min(len(draw.extras["campaigns"]), len(slack))
        picked = sorted(int(i) for i in rng.choice(len(slack), size=wanted, replace=False))
        campaigns = [slack[i] for i in picked]
        draw = replace(draw, strength=strength, extras={**draw.extras, "campaigns": campaigns})
        edits = draw_edits("budget", draw, ctx.panel, ctx.specs, _hour(rng), campaigns=campaigns)
        interventions = budget_interventions(campaigns, factor, draw.window, ctx.specs)
        details = {"campaigns": tuple(campaigns), "factor": factor, "onset": draw.window.onset}
        return Process("twin:BUDGET_CAP", tuple(interventions), tuple(edits), details)
    return None


def _bid_twin(ctx: TwinContext, prior: TwinPrior, rng: np.random.Generator) -> Process | None:
    """A draw from the cause's prior, its raise from the upper part of the prior's range as the
    accepted causes' are (the verifier keeps a raise that explains the page: accepted raises
    on ads_test were +115% to +179% (p10-p90) of the prior's +80% to +200%; a twin drawn from
    the whole range was smaller, and the raise's size named the cause). No preference for small
    segments: that would make the edited segment's name tell the twin from the cause. Whether it moves the alert is the
    account's and the episode's: a segment with little volume, a KPI the raise does not hurt;
    an episode where it does account for an alert is rejected by the oracle gate."""
    point = ctx.points["BID_MODIFIER_CHANGE"]
    draw = point.sample(rng, ctx.panel)
    low, high = point.prior.strength
    q0, q1 = prior.bid_quantiles
    draw = replace(draw, strength=low + (q0 + (q1 - q0) * float(rng.random())) * (high - low))
    edits = draw_edits("bid_modifier", draw, ctx.panel, ctx.specs, _hour(rng))
    if not edits:
        return None
    interventions = tuple(point.interventions(draw))
    details = {"slice": draw.slice.canonical(), "strength": draw.strength}
    return Process("twin:BID_MODIFIER_CHANGE", interventions, tuple(edits), details)


def _targeting_twin(ctx: TwinContext, prior: TwinPrior, rng: np.random.Generator) -> Process | None:
    draw = ctx.points["TARGETING_EXPANSION"].sample(rng, ctx.panel)
    gain = float(rng.uniform(*prior.targeting_gain))
    edits = draw_edits("targeting", draw, ctx.panel, ctx.specs, _hour(rng))
    iv = Scale("targeting_eligibility", where=draw.slice, window=draw.window, factor=1.0 + gain)
    details = {"slice": draw.slice.canonical(), "gain": gain}
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
        if twin is not None:
            out.append(twin)
    return tuple(out)
