"""The change-history rows a change-type cause writes, in the form the account's own edits take.

A cause that is an account edit (a budget cut, a bid adjustment, a widened targeting) and its
twins in the background (the same edit, drawn from the cause's own prior, that did not move the
alert: :mod:`causaltrace_domains.ads.twins`) write their rows through :func:`draw_edits`, so the
form, size, breadth and timing of an edit never say which of the two it is; only the metrics
after it do.

The form follows the platform: budgets are set per campaign; a bid adjustment is written on
every campaign serving the segment that takes adjustments (Performance Max takes none; smart
bidding accepts them and ignores them); a targeting widening takes the form the campaign type
has: location options on any campaign, and for audiences the observation setting on search,
optimized targeting on display and final URL expansion on Performance Max (there is no
optimized targeting on search).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from causaltrace import InterventionDraw, Panel, Slice
from causaltrace_domains.ads.config import CampaignSpec
from causaltrace_domains.ads.records import Edit

# The audience-targeting edit that widens reach, per campaign type: (field, old, new).
AUDIENCE_WIDENING = {
    "search": ("audience_setting", "targeting", "observation"),
    "display": ("optimized_targeting", "off", "on"),
    "performance_max": ("final_url_expansion", "off", "on"),
}
LOCATION_WIDENING = ("location_options", "presence", "presence_or_interest")


def touched_campaigns(panel: Panel, where: Slice) -> list[str]:
    """The campaigns with a cell in ``where``, in the panel's order."""
    inside = where.mask(panel)
    labels = panel.labels("campaign")
    return [c for c in panel.dimension("campaign").levels if (inside & (labels == c)).any()]


def draw_edits(
    kind: str | None,
    draw: InterventionDraw,
    panel: Panel,
    specs: Mapping[str, CampaignSpec],
    hour: int,
    campaigns: Sequence[str] | None = None,
) -> list[Edit]:
    """The rows an edit of ``kind`` (a cause's ``account_change``) writes for ``draw``.

    ``campaigns`` overrides the campaigns a budget edit reaches (default: the draw's
    ``extras["campaigns"]``); the other kinds reach every campaign serving the draw's slice
    that can take the edit."""
    if kind is None:
        return []
    day = draw.window.onset
    # The campaign column names the campaign; the target is the segment within it.
    segment = tuple((d, v) for d, v in draw.slice.conditions if d != "campaign")
    target = "&".join(f"{d}={v}" for d, v in segment) or "campaign"
    if kind == "budget":
        chosen = campaigns if campaigns is not None else draw.extras.get("campaigns") or specs
        factor = 1.0 - draw.strength
        return [
            Edit(day, hour, c, "budget", "campaign", "daily_budget", "", "", factor=factor)
            for c in chosen
        ]
    touched = [specs[c] for c in touched_campaigns(panel, draw.slice)]
    if kind == "bid_modifier":
        pct = f"+{round(draw.strength * 100)}%"
        return [
            Edit(day, hour, c.name, "bid_modifier", target, "bid_adjustment", "+0%", pct)
            for c in touched
            if c.takes_bid_adjustments
        ]
    if kind == "targeting":
        rows = []
        for c in touched:
            if "audience" in draw.slice.dims:
                field, old, new = AUDIENCE_WIDENING[c.kind]
            else:
                field, old, new = LOCATION_WIDENING
            rows.append(Edit(day, hour, c.name, "targeting", target, field, old, new))
        return rows
    return []  # e.g. a policy disapproval: the platform does not log it as an edit
