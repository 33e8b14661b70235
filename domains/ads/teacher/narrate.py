"""The teacher's words: reading the page, interpreting each result, deciding the next query.

Wording is drawn from small banks with the episode's rng, so rows differ in phrasing while
saying the same thing; every interpretation quotes the numbers it relies on (the probes build
those sentences from the rows as printed).
"""

from __future__ import annotations

import numpy as np

from causaltrace_domains.ads.teacher.belief import Belief, Hypothesis
from causaltrace_domains.ads.teacher.page import Page
from causaltrace_domains.ads.teacher.probes import Finding, Probe
from causaltrace_domains.ads.teacher.signatures import NO_SIGNAL, compatible

PURPOSE = {
    "changes": (
        "Read the change history: a budget cut, a large bid raise or a widened targeting would be "
        "the edit behind {causes}. Twins of such edits may sit there too, so the log can only "
        "narrow these hypotheses to the edited segments.",
        "Which edits could be behind {causes}? The change history narrows them to the edited "
        "segments; whether an edit moved anything is for the metrics to say.",
    ),
    "status": (
        "Only an ad that is not fully approved can be an AD_DISAPPROVAL: list those.",
        "Which enabled ads are disapproved or limited? Only they can carry an AD_DISAPPROVAL.",
    ),
    "account": (
        "Account level: impression share lost to budget and to rank, and CPC per day, to "
        "separate BUDGET_CAP from COMPETITIVE_PRESSURE.",
        "Do we lose auctions we were eligible for? Impression share lost to budget "
        "(BUDGET_CAP) and to rank with CPC rising (COMPETITIVE_PRESSURE), per day.",
    ),
    "demand": (
        "Are there fewer auctions to enter? Eligible auctions per day against the usual level "
        "of their weekday (DEMAND_SHIFT), and how much of each paged move such a drop makes.",
        "Demand: each day's eligible auctions against its weekday's usual level, to see whether "
        "the market shrank (DEMAND_SHIFT) and by how much of the paged moves.",
    ),
    "site": (
        "Platform conversions against backend orders by device, browser and geo: a "
        "TRACKING_OUTAGE loses conversions but not orders, a LANDING_PAGE_BREAK loses both.",
        "Split conversions and backend orders by device, browser and geo: lost tags "
        "(TRACKING_OUTAGE) and a broken page (LANDING_PAGE_BREAK) leave different footprints.",
    ),
    "creatives": (
        "Each ad's clicks against what its own CTR before would give (CREATIVE_FATIGUE), and its "
        "impressions (AD_DISAPPROVAL), by device and by audience.",
        "Per ad: clicks now against the clicks its earlier CTR predicts, and its impressions, to "
        "test CREATIVE_FATIGUE and AD_DISAPPROVAL.",
    ),
    "invalid": (
        "Invalid clicks and CTR by placement and geo against their own rates before: "
        "INVALID_TRAFFIC raises both.",
        "Bots raise invalid clicks and CTR together: read both by placement and geo "
        "(INVALID_TRAFFIC).",
    ),
    "ad_share": (
        "The flagged ads' impressions against the other ads of their campaign, by geo: a "
        "disapproved ad stops serving and loses its share (AD_DISAPPROVAL).",
        "Did a flagged ad stop serving? Its impressions against its campaign's other ads, by "
        "geo (AD_DISAPPROVAL).",
    ),
    "placements": (
        "Each placement's impressions within the campaigns that serve it (PLACEMENT_SHIFT).",
        "Has automatic placement moved volume? Impressions per campaign and placement "
        "(PLACEMENT_SHIFT).",
    ),
    "check": (
        "Does {h} account for the page? Its segment's {columns} per campaign, now against before "
        "(conversions matured with the lag curve).",
        "Weigh {h} against the alerts: how much of the paged move sits in its segment "
        "({columns} per campaign, lag-adjusted)?",
    ),
    "check_edit": (
        "Did the edit behind {h} move its segment, and enough to account for the page? "
        "{columns} per campaign, in and out of the segment, now against before.",
        "An edit only matters if its segment moved: {columns} in and out of it per campaign, "
        "now against before, for {h}.",
    ),
}
CHECKING = (
    "{h} leads; a check before concluding.",
    "With {h} ahead, I check what else the page allows before concluding.",
    "Check before concluding on {h}:",
)
# What each scan reads, for the closing line that says which were not needed.
SCAN_NAMES = {
    "changes": "the change history",
    "status": "the ad statuses",
    "account": "the account's auction series",
    "demand": "eligible auctions",
    "site": "conversions against orders",
    "creatives": "per-ad clicks",
    "invalid": "invalid clicks",
    "ad_share": "the flagged ads' impressions",
    "placements": "placements",
}
STRENGTHEN = ("Strengthens {x}.", "This supports {x}.", "Evidence for {x}.")
RULE_OUT = ("Rules out {x}.", "Against {x}.", "That leaves out {x}.")


class Voice:
    """One episode's phrasing."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def pick(self, options: tuple[str, ...]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def opening(self, page: Page, belief: Belief) -> str:
        alerts = "; ".join(a.describe() for a in page.alerts)
        fits = sorted(
            c
            for c in belief.cause_mass()
            if c != NO_SIGNAL and any(compatible(c, a.kpi) for a in page.alerts)
        )
        lead = self.pick(("The page: ", "Paged: ", "The alerts: "))
        text = f"{lead}{alerts}."
        if fits:
            text += f" Causes whose footprint can make these moves: {', '.join(fits)}."
        if page.concurrent:
            text += " Several causes may be at work: I will explain the alerts cause by cause."
        return text

    def interpret(self, finding: Finding) -> str:
        parts = list(finding.sentences)
        if finding.strengthened:
            names = ", ".join(dict.fromkeys(h.text() for h in finding.strengthened[:3]))
            parts.append(self.pick(STRENGTHEN).format(x=names))
        if finding.weakened:
            parts.append(self.pick(RULE_OUT).format(x=", ".join(finding.weakened[:4])))
        return " ".join(parts)

    def standing(self, belief: Belief, n: int = 3) -> str:
        """The leading hypotheses in order, in words: the posterior is the teacher's own
        bookkeeping, computed in no tool output, so its numbers are not quoted (issue 40: every
        number a row cites is one the row printed)."""
        top = [(h, p) for h, p in belief.ranked()[:n] if p >= 0.01]
        if not top:
            return ""
        lead, p_lead = top[0]
        if p_lead >= 0.9:
            items = f"{lead.text()}, well ahead"
        else:
            items = ", then ".join(h.text() for h, _ in top)
        return self.pick(("Leading now: ", "Where I stand: ", "Best hypotheses: ")) + items + "."

    def decide(
        self,
        probe: Probe,
        belief: Belief,
        page: Page,
        columns: list[str],
        checking: Hypothesis | None = None,
    ) -> str:
        """Why the next query: its purpose; once a hypothesis leads (``checking``), the call is
        stated as a check of it (an alternative the page allows, or its own share of the page),
        so no call after the decision goes unexplained."""
        key = probe.name if probe.name in PURPOSE else "check"
        h = getattr(probe, "h", None)
        if isinstance(h, Hypothesis) and h.cause in ("BID_MODIFIER_CHANGE", "TARGETING_EXPANSION"):
            key = "check_edit"
        causes = ", ".join(getattr(probe, "causes", ()))
        text = self.pick(PURPOSE[key]).format(
            causes=causes, h=h.text() if h else "", columns=", ".join(columns)
        )
        if checking is not None:
            lead = self.pick(CHECKING).format(h=checking.text())
            return f"{lead} {text}"
        return self.pick(("Next: ", "Now: ", "")) + text

    def conclude(
        self, answer: list[Hypothesis], single_reason: str, skipped: tuple[str, ...] = ()
    ) -> str:
        """The answer and why; ``skipped``: the scans the decision made unnecessary (issue 40:
        the calls an investigation saves against a sweep)."""
        names = " and ".join(h.text() for h in answer)
        saved = ""
        if skipped:
            read = ", ".join(SCAN_NAMES.get(s, s) for s in skipped)
            saved = " " + self.pick(
                ("Not needed: {x}.", "Left unread, as the evidence decided: {x}.")
            )
            saved = saved.format(x=read)
        if len(answer) > 1:
            return f"Two causes account for the page: {names}.{saved} Submitting both."
        return f"{single_reason}{saved} Submitting {names}."
