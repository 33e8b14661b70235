"""The change history: the cause's own edits (when the cause is an account edit) among the edits
the background processes logged and plausible decoy edits.

The background itself (processes in both worlds, decoys, their edits) is drawn in
:mod:`causaltrace_domains.ads.background`; this module renders the rows. Decoy edits use the same change
types as the causes that are account edits (budget, bid adjustment, targeting), so the existence
of an edit never gives a cause away: an analyst has to check whether the data moved where and
when the edit says.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from causaltrace import Background, InterventionDraw, Panel, Slice, World
from causaltrace_domains.ads.background import (
    HISTORY_DAYS,
    USERS,
    BackgroundPrior,
    Edit,
    sample_background,
)

DecoyEdit = Edit  # the former name of a change-history row
COLUMNS = (
    "change_time",
    "user",
    "campaign",
    "change_type",
    "target",
    "field",
    "old_value",
    "new_value",
)
CPA_DAYS = 14  # a target-CPA edit's old value: the campaign's CPA over the days before it

__all__ = [
    "COLUMNS",
    "HISTORY_DAYS",
    "USERS",
    "BackgroundPrior",
    "DecoyEdit",
    "Edit",
    "cause_edits",
    "change_history",
    "sample_background",
]


def cause_edits(
    draw: InterventionDraw, panel: Panel, account_change: str | None, hour: int
) -> list[Edit]:
    """The edit(s) the account itself made when the cause is an account edit (at most one per
    campaign, which the background's ``total_edits`` leaves room for)."""
    if account_change is None:
        return []
    touched = [
        c
        for c in panel.dimension("campaign").levels
        if (Slice.of(campaign=c).mask(panel) & draw.slice.mask(panel)).any()
    ]
    day, target = draw.window.onset, draw.slice.canonical()
    if account_change == "budget":
        return [Edit(day, hour, c, "budget", "campaign", "daily_budget", "", "") for c in touched]
    if account_change == "bid_modifier":
        pct = f"+{round(draw.strength * 100)}%"
        return [
            Edit(day, hour, c, "bid_modifier", target, "bid_adjustment", "+0%", pct)
            for c in touched
        ]
    if account_change == "targeting":
        field, old, new = (
            ("optimized_targeting", "off", "on")
            if "audience" in draw.slice.dims
            else ("location_options", "presence", "presence_or_interest")
        )
        return [Edit(day, hour, c, "targeting", target, field, old, new) for c in touched]
    return []


def change_history(
    panel: Panel,
    world: World,
    background: Background,
    cause: list[Edit],
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Exactly ``total_edits`` edits, newest first.

    Budget values are read from the world (the day before and the day of the edit); a
    target-CPA edit's old value is the campaign's CPA over the 14 days before it and its new
    value that times the edit's ratio. One draw from ``rng`` per row (the minute).
    """
    notes = background.notes
    fill = notes["total_edits"] - len(cause) - len(notes["effectful"])
    edits = [*cause, *notes["effectful"], *notes["effect_free"][: max(fill, 0)]]
    dates = panel.time.values.astype("datetime64[D]")
    campaigns = panel.labels("campaign")
    rows = []
    for edit, drawn_user in zip(edits, notes["users"]):
        old, new = edit.old_value, edit.new_value
        if edit.field == "daily_budget":
            cell = int(np.flatnonzero(campaigns == edit.campaign)[0])
            old = _money(float(world["daily_budget"][cell, max(edit.day - 1, 0)]))
            new = _money(float(world["daily_budget"][cell, edit.day]))
        ratio = getattr(edit, "cpa_ratio", None)
        if ratio is not None:
            mask = campaigns == edit.campaign
            lo, hi = max(edit.day - CPA_DAYS, 0), max(edit.day, 1)
            cost = float(world["cost"][mask, lo:hi].sum())
            conversions = float(world["conversions"][mask, lo:hi].sum())
            target = max(round(cost / max(conversions, 1.0)), 1)  # targets in whole units
            old, new = f"{target:.2f}", f"{target * ratio:.2f}"
        stamp = pd.Timestamp(dates[edit.day]) + pd.Timedelta(
            hours=edit.hour, minutes=int(rng.integers(0, 60))
        )
        user = getattr(edit, "user", "") or drawn_user
        rows.append(
            (stamp, user, edit.campaign, edit.change_type, edit.target, edit.field, old, new)
        )
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame["change_time"] = pd.to_datetime(frame["change_time"]).astype("datetime64[us]")
    return frame.sort_values("change_time", ascending=False, kind="stable").reset_index(drop=True)


def _money(value: float) -> str:
    return f"{value:.0f}"  # budgets are set in whole currency units
